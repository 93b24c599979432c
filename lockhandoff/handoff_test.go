package lockhandoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/presence"
)

// TestSameAsTheCore: the public defaults are the core's.
func TestSameAsTheCore(t *testing.T) {
	if DefaultRequestRepeat != handoffcore.DefaultRequestRepeat || DefaultParkMin != handoffcore.DefaultParkMin ||
		DefaultParkMax != handoffcore.DefaultParkMax {
		t.Errorf("defaults %v %v %v, the core's %v %v %v", DefaultRequestRepeat, DefaultParkMin, DefaultParkMax,
			handoffcore.DefaultRequestRepeat, handoffcore.DefaultParkMin, handoffcore.DefaultParkMax)
	}
}

type stopped struct{ at time.Time }

func (s stopped) Read(context.Context, string) presence.Reading {
	return presence.Reading{Status: presence.Stopped, At: s.at, LastBeat: s.at.Add(-time.Minute)}
}

// TestReaderCarriesEveryField: the core reads what the given Presence says.
func TestReaderCarriesEveryField(t *testing.T) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	err := errors.New("x")
	for _, in := range []presence.Reading{
		{Status: presence.Alive, ExpiresIn: 7 * time.Second, At: at},
		{Status: presence.Unknown, Err: err},
		stopped{at}.Read(context.Background(), "a"),
	} {
		got := reader{fixed(in)}.Read(context.Background(), "a")
		if int(got.Status) != int(in.Status) || got.ExpiresIn != in.ExpiresIn || got.Err != in.Err ||
			!got.At.Equal(in.At) || !got.LastBeat.Equal(in.LastBeat) {
			t.Errorf("read %+v as %+v", in, got)
		}
	}
}

type fixed presence.Reading

func (f fixed) Read(context.Context, string) presence.Reading { return presence.Reading(f) }

func TestNewRefusesAConfigWithoutPresence(t *testing.T) {
	if _, err := New(Config{JobID: "a"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without Presence = %v, want ErrInvalidConfig", err)
	}
}
