package handoffcore_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
)

func TestNew(t *testing.T) {
	p := newFakePresence(nil)
	tests := []struct {
		name    string
		cfg     handoffcore.Config
		wantErr bool
	}{
		{name: "JobID and Presence: the rest defaults", cfg: handoffcore.Config{JobID: jobA, Presence: p}},
		{name: "every timing set", cfg: handoffcore.Config{JobID: jobA, Presence: p, Beat: time.Second,
			RequestRepeat: time.Second, ParkMin: time.Second, ParkMax: 3 * time.Second}},
		{name: "ParkMin equals ParkMax", cfg: handoffcore.Config{JobID: jobA, Presence: p, ParkMin: time.Second, ParkMax: time.Second}},
		{name: "no JobID", cfg: handoffcore.Config{Presence: p}, wantErr: true},
		{name: "no Presence", cfg: handoffcore.Config{JobID: jobA}, wantErr: true},
		{name: "negative Beat", cfg: handoffcore.Config{JobID: jobA, Presence: p, Beat: -time.Second}, wantErr: true},
		{name: "negative RequestRepeat", cfg: handoffcore.Config{JobID: jobA, Presence: p, RequestRepeat: -1}, wantErr: true},
		{name: "negative ParkMin", cfg: handoffcore.Config{JobID: jobA, Presence: p, ParkMin: -time.Millisecond}, wantErr: true},
		{name: "negative ParkMax", cfg: handoffcore.Config{JobID: jobA, Presence: p, ParkMax: -time.Millisecond}, wantErr: true},
		{name: "ParkMax below ParkMin", cfg: handoffcore.Config{JobID: jobA, Presence: p,
			ParkMin: time.Second, ParkMax: 500 * time.Millisecond}, wantErr: true},
		{name: "ParkMin above the default ParkMax: refused, not raised", cfg: handoffcore.Config{JobID: jobA, Presence: p,
			ParkMin: 3 * time.Second}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := handoffcore.New(tc.cfg)
			if tc.wantErr {
				if !errors.Is(err, handoffcore.ErrInvalidConfig) || h != nil {
					t.Fatalf("New = %v, %v; want nil, ErrInvalidConfig", h, err)
				}
				return
			}
			if err != nil || h == nil {
				t.Fatalf("New = %v, %v; want a Handoff", h, err)
			}
			if err := h.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestHandoffRoutesRequests(t *testing.T) {
	req := func(driver string) messaging.Message {
		return messaging.Message{Type: messaging.TypeRequest, Driver: driver, Key: playerKey, Requester: jobB, Token: "tok-1"}
	}
	got1 := []request{{Key: playerKey, Token: "tok-1"}}
	tests := []struct {
		name       string
		register   []string
		unregister []string
		msgs       []messaging.Message // sent by server-b to server-a
		want       map[string][]request
		wantStats  handoffcore.Stats
	}{
		{
			name:      "request for a registered driver reaches its holder",
			register:  []string{driverName},
			msgs:      []messaging.Message{req(driverName)},
			want:      map[string][]request{driverName: got1},
			wantStats: handoffcore.Stats{RequestsReceived: 1},
		},
		{
			name:      "two drivers: each gets its own",
			register:  []string{driverName, "Inventory"},
			msgs:      []messaging.Message{req("Inventory")},
			want:      map[string][]request{"Inventory": got1},
			wantStats: handoffcore.Stats{RequestsReceived: 1},
		},
		{
			name:      "request for an unknown driver is dropped and counted",
			register:  []string{driverName},
			msgs:      []messaging.Message{req("Inventory"), req("Inventory")},
			wantStats: handoffcore.Stats{DroppedUnknownDriver: 2},
		},
		{
			name:       "Unregister stops routing",
			register:   []string{driverName, "Inventory"},
			unregister: []string{driverName},
			msgs:       []messaging.Message{req(driverName), req("Inventory")},
			want:       map[string][]request{"Inventory": got1},
			wantStats:  handoffcore.Stats{RequestsReceived: 1, DroppedUnknownDriver: 1},
		},
		{
			name:      "reply for an unknown driver nobody waits on is dropped and counted",
			register:  []string{driverName},
			msgs:      []messaging.Message{{Type: messaging.TypeReply, Driver: "Inventory", Key: playerKey}},
			wantStats: handoffcore.Stats{DroppedUnknownDriver: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				holders := make(map[string]*fakeHolder)
				for _, name := range tc.register {
					holders[name] = &fakeHolder{}
					if err := h.Register(name, handoffcore.Handlers{Release: holders[name].release}); err != nil {
						t.Fatalf("Register(%q): %v", name, err)
					}
				}
				for _, name := range tc.unregister {
					h.Unregister(name)
				}
				h.Start()

				b := wd.bus.Endpoint(jobB)
				for _, m := range tc.msgs {
					if err := b.Publish(t.Context(), jobA, m); err != nil {
						t.Fatalf("Publish: %v", err)
					}
				}
				synctest.Wait()

				for _, name := range slices.Sorted(maps.Keys(holders)) {
					if got := holders[name].requests(); !slices.Equal(got, tc.want[name]) {
						t.Errorf("holder %s got %+v, want %+v", name, got, tc.want[name])
					}
				}
				if got := h.Stats(); got != tc.wantStats {
					t.Errorf("Stats() = %+v, want %+v", got, tc.wantStats)
				}
			})
		})
	}
}

func TestHandoffRegister(t *testing.T) {
	type op struct {
		unregister bool
		name       string
		wantErr    error // for Register
	}
	tests := []struct {
		name string
		ops  []op
		// a request for driverName then reaches the holder of this op
		// (-1: none).
		wantHolder int
	}{
		{
			name:       "same name twice: refused, the first keeps the requests",
			ops:        []op{{name: driverName}, {name: driverName, wantErr: handoffcore.ErrDuplicateDriver}},
			wantHolder: 0,
		},
		{
			name:       "two names",
			ops:        []op{{name: "Inventory"}, {name: driverName}},
			wantHolder: 1,
		},
		{
			name:       "Unregister frees the name",
			ops:        []op{{name: driverName}, {unregister: true, name: driverName}, {name: driverName}},
			wantHolder: 2,
		},
		{
			name:       "Unregister of an unknown name does nothing",
			ops:        []op{{name: driverName}, {unregister: true, name: "Inventory"}, {name: driverName, wantErr: handoffcore.ErrDuplicateDriver}},
			wantHolder: 0,
		},
		{
			name:       "Unregister: nobody gets the request",
			ops:        []op{{name: driverName}, {unregister: true, name: driverName}},
			wantHolder: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				h.Start()
				holders := make([]*fakeHolder, len(tc.ops))
				for i, o := range tc.ops {
					if o.unregister {
						h.Unregister(o.name)
						continue
					}
					holders[i] = &fakeHolder{}
					err := h.Register(o.name, handoffcore.Handlers{Release: holders[i].release})
					if !errors.Is(err, o.wantErr) || (err == nil) != (o.wantErr == nil) {
						t.Fatalf("Register(%q) #%d = %v, want %v", o.name, i+1, err, o.wantErr)
					}
				}

				m := messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: playerKey, Requester: jobB, Token: "tok-1"}
				if err := wd.bus.Endpoint(jobB).Publish(t.Context(), jobA, m); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				for i, hl := range holders {
					if hl == nil {
						continue
					}
					want := 0
					if i == tc.wantHolder {
						want = 1
					}
					if got := len(hl.requests()); got != want {
						t.Errorf("holder of op #%d got %d requests, want %d", i+1, got, want)
					}
				}
			})
		})
	}
}

// lifecycle is what a Handoff did to its bus and presence.
type lifecycle struct {
	Subscribes, Unsubscribes int
	Published                int // messages on the bus
	HolderRequests           int // requests that reached A's holder
}

func TestHandoffLifecycle(t *testing.T) {
	ctx := context.Background()
	// reqToA is a request B sends to A after ops ran.
	reqToA := messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: playerKey, Requester: jobB, Token: "tok-1"}
	tests := []struct {
		name    string
		passive bool
		atOnce  bool // A's driver lets go at once
		ops     func(t *testing.T, h *handoffcore.Handoff)
		want    lifecycle
	}{
		{
			name: "Start subscribes once",
			ops:  func(t *testing.T, h *handoffcore.Handoff) { h.Start(); h.Start(); h.Start() },
			want: lifecycle{Subscribes: 1, Published: 1, HolderRequests: 1},
		},
		{
			name: "Close unsubscribes",
			ops: func(t *testing.T, h *handoffcore.Handoff) {
				h.Start()
				if err := h.Close(ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
			},
			want: lifecycle{Subscribes: 1, Unsubscribes: 1, Published: 1},
		},
		{
			name: "Close twice: once",
			ops: func(t *testing.T, h *handoffcore.Handoff) {
				h.Start()
				for range 2 {
					if err := h.Close(ctx); err != nil {
						t.Errorf("Close: %v", err)
					}
				}
			},
			want: lifecycle{Subscribes: 1, Unsubscribes: 1, Published: 1},
		},
		{
			name: "Start after Close starts nothing",
			ops: func(t *testing.T, h *handoffcore.Handoff) {
				if err := h.Close(ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
				h.Start()
			},
			want: lifecycle{Published: 1},
		},
		{
			name:   "a request is answered once the driver lets go",
			atOnce: true,
			ops:    func(t *testing.T, h *handoffcore.Handoff) { h.Start() },
			want:   lifecycle{Subscribes: 1, Published: 2, HolderRequests: 1},
		},
		{
			name:    "no bus (handoff off): no subscription; Close leaves all alone",
			passive: true,
			atOnce:  true,
			ops: func(t *testing.T, h *handoffcore.Handoff) {
				h.Start()
				if err := h.Close(ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
			},
			want: lifecycle{Published: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				bus := countingBus(wd.bus.Endpoint(jobA))
				p := newFakePresence(wd.clk)
				cfg := handoffcore.Config{JobID: jobA, Bus: bus, Presence: p}
				if tc.passive { // handoff off: the Node gives it no bus
					cfg.Bus = nil
				}
				h := wd.handoff(t, cfg)
				holder := &fakeHolder{AtOnce: tc.atOnce}
				if err := h.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
					t.Fatal(err)
				}
				tc.ops(t, h)
				synctest.Wait()
				if err := wd.bus.Endpoint(jobB).Publish(ctx, jobA, reqToA); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()

				var got lifecycle
				got.Subscribes, got.Unsubscribes = bus.counts()
				got.Published = wd.bus.Stats().Published
				got.HolderRequests = len(holder.requests())
				if got != tc.want {
					t.Errorf("got  %+v\nwant %+v", got, tc.want)
				}
			})
		})
	}
}

func TestHandoffSubscribeFails(t *testing.T) {
	tests := []struct {
		name string
		// bus is B's bus; it fails to subscribe.
		bus func(t *testing.T, wd *world) messaging.Bus
	}{
		{
			name: "Subscribe returns an error",
			bus: func(t *testing.T, wd *world) messaging.Bus {
				inner := wd.bus.Endpoint(jobB)
				return &fakeBus{
					PublishFn: inner.Publish,
					SubscribeFn: func(string, messaging.Handler) (messaging.Subscription, error) {
						return nil, errors.New("nats: permissions violation")
					},
				}
			},
		},
		{
			name: "subject already taken on the MemBus",
			bus: func(t *testing.T, wd *world) messaging.Bus {
				wd.record(t, jobB) // someone else holds server-b's subject
				return wd.bus.Endpoint(jobB)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				holder := &fakeHolder{AtOnce: true}
				hA := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				if err := hA.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
					t.Fatal(err)
				}
				hA.Start()

				log, logs := newLogger()
				pB := newFakePresence(wd.clk)
				pB.set(jobA, alive10s)
				hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: tc.bus(t, wd), Presence: pB, Logger: log})
				hB.Start()

				if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "subscribe failed") {
					t.Errorf("log = %q, want a warning about the failed subscribe", out)
				}

				// B still waits: its request reaches A, A's reply cannot reach B,
				// so B polls on the park grid.
				w := hB.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
				defer w.Close()
				var got []time.Duration
				for range 3 {
					s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", true))
					if s.Err != nil || s.Attempt != (handoffcore.Attempt{}) {
						t.Fatalf("Next = %+v, %v; want nothing", s.Attempt, s.Err)
					}
					got = append(got, s.At)
				}
				synctest.Wait()
				if want := grid(3); !slices.Equal(got, want) {
					t.Errorf("Next returned at %v, want %v", got, want)
				}
				if got := len(holder.requests()); got != 1 {
					t.Errorf("A's holder got %d requests, want 1", got)
				}
				if s := hB.Stats(); s.RequestsSent != 1 || s.RepliesReceived != 0 {
					t.Errorf("B's Stats() = %+v, want 1 request sent, no reply received", s)
				}
			})
		})
	}
}

func TestHandoffPublishFailed(t *testing.T) {
	errDown := errors.New("bus down")
	tests := []struct {
		name string
		// fail says whether the publish of the n-th (from 0) message fails.
		fail func(n int, m messaging.Message) bool
		// send publishes from B: requests through a Wait, or a reply.
		reply     bool
		nexts     int
		wantStats handoffcore.Stats
	}{
		{
			name:      "request fails",
			fail:      func(int, messaging.Message) bool { return true },
			nexts:     1,
			wantStats: handoffcore.Stats{PublishFailed: 1},
		},
		{
			name:      "request fails, its repeat succeeds",
			fail:      func(n int, _ messaging.Message) bool { return n == 0 },
			nexts:     5, // requests at 0 and 5.5 s
			wantStats: handoffcore.Stats{PublishFailed: 1, RequestsSent: 1},
		},
		{
			name:      "reply fails",
			fail:      func(_ int, m messaging.Message) bool { return m.Type == messaging.TypeReply },
			reply:     true,
			wantStats: handoffcore.Stats{PublishFailed: 1, RequestsReceived: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				wd.record(t, jobA)
				n := 0
				wd.bus.SetPublishError(func(_ string, m messaging.Message) error {
					defer func() { n++ }()
					if tc.fail(n, m) {
						return errDown
					}
					return nil
				})
				log, logs := newLogger()
				p := newFakePresence(wd.clk)
				p.set(jobA, alive10s)
				h := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: p, Logger: log})
				h.Start()

				if tc.reply {
					// A asks B (h) for a key B's driver lets go at once: B replies.
					if err := h.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{AtOnce: true}).release}); err != nil {
						t.Fatal(err)
					}
					_ = wd.bus.Endpoint(jobA).Publish(t.Context(), jobB, messaging.Message{Type: messaging.TypeRequest,
						Driver: driverName, Key: playerKey, Requester: jobA, Token: "tok-1"})
					synctest.Wait()
				}
				if tc.nexts > 0 {
					w := h.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), true)
					for range tc.nexts {
						if _, err := w.Next(t.Context(), lockOf(jobA, "tok-1", true)); err != nil {
							t.Fatal(err)
						}
					}
					w.Close()
				}
				synctest.Wait()

				if got := h.Stats(); got != tc.wantStats {
					t.Errorf("Stats() = %+v, want %+v", got, tc.wantStats)
				}
				if got := wd.bus.Stats().Failed; got != int(tc.wantStats.PublishFailed) {
					t.Errorf("bus counted %d failed publishes, want %d", got, tc.wantStats.PublishFailed)
				}
				if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "publish failed") {
					t.Errorf("log = %q, want a warning about the failed publish", out)
				}
			})
		})
	}
}

func TestHandoffCloseWaitsForPublishes(t *testing.T) {
	tests := []struct {
		name        string
		publishTime time.Duration // how long a publish takes (0: until its ctx ends)
		closeWithin time.Duration // Close's ctx
		wantAt      time.Duration // when Close returns
		wantErr     error
		wantStats   handoffcore.Stats
	}{
		{
			name:        "a reply in flight is sent before Close returns",
			publishTime: sec(1),
			closeWithin: sec(5),
			wantAt:      sec(1),
			wantStats:   handoffcore.Stats{RequestsReceived: 1, RepliesSent: 1},
		},
		{
			// The publish then ends with Close's cancel: not a failure.
			name:        "Close is bounded by its ctx",
			closeWithin: sec(2),
			wantAt:      sec(2),
			wantErr:     context.DeadlineExceeded,
			wantStats:   handoffcore.Stats{RequestsReceived: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				var deliver messaging.Handler
				bus := &fakeBus{SubscribeFn: func(_ string, h messaging.Handler) (messaging.Subscription, error) {
					deliver = h
					return nil, nil
				}, PublishFn: func(ctx context.Context, _ string, _ messaging.Message) error {
					if tc.publishTime == 0 {
						<-ctx.Done()
						return ctx.Err()
					}
					select {
					case <-wd.clk.After(tc.publishTime):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}}
				p := newFakePresence(wd.clk)
				h := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: bus, Presence: p})
				if err := h.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{AtOnce: true}).release}); err != nil {
					t.Fatal(err)
				}
				h.Start()
				deliver(messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: playerKey, Requester: jobB, Token: "tok-1"})

				ctx, cancel := context.WithTimeout(t.Context(), tc.closeWithin)
				defer cancel()
				err := h.Close(ctx)
				if at := wd.elapsed(); at != tc.wantAt {
					t.Errorf("Close returned at %v, want %v", at, tc.wantAt)
				}
				if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
					t.Errorf("Close = %v, want %v", err, tc.wantErr)
				}
				synctest.Wait()
				if got := h.Stats(); got != tc.wantStats {
					t.Errorf("Stats() = %+v, want %+v", got, tc.wantStats)
				}
			})
		})
	}
}

// Compile-time: the real presence satisfies what the tests fake.
var _ handoffcore.Presence = (*presencecore.Presence)(nil)

// A reply for a driver the waiting server has not registered (a driver
// with handoff off waits passively without registering) must still wake
// the Wait, count as a reply, and let the Wait close. With -race, the
// second case reports a data race in Handoff.onMessage: it reads len(ws),
// the Wait set of h.waits, after releasing h.mu, while Wait.Close deletes
// from that same map under h.mu.
func TestHandoffReplyForUnregisteredDriver(t *testing.T) {
	tests := []struct {
		name     string
		register bool // server B registers the driver it waits for
	}{
		{name: "driver registered", register: true},
		{name: "driver not registered", register: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				hA := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				hB := wd.handoff(t, handoffcore.Config{JobID: jobB, Bus: wd.bus.Endpoint(jobB), Presence: newFakePresence(wd.clk)})
				if tc.register {
					if err := hB.Register(driverName, handoffcore.Handlers{Release: (&fakeHolder{}).release}); err != nil {
						t.Fatal(err)
					}
				}
				hA.Start()
				hB.Start()

				w := hB.NewWait(driverName, playerKey, wd.clk.Now().Add(time.Minute), false)
				sendReply(wd, jobA, jobB, playerKey)
				s := next(t.Context(), wd, w, lockOf(jobA, "tok-1", false))
				w.Close() // no synctest.Wait before: the reply's handler may still run
				if s.At != 0 || s.Err != nil {
					t.Errorf("Next = at %v, %v; want a wake at 0", s.At, s.Err)
				}
				synctest.Wait()
				if got, want := hB.Stats(), (handoffcore.Stats{RepliesReceived: 1}); got != want {
					t.Errorf("B's Stats() = %+v, want %+v", got, want)
				}
			})
		})
	}
}

// A request is answered when the driver's channel closes: once however
// often it repeats, never after Close.
func TestHandoffRepliesWhenReleased(t *testing.T) {
	tests := []struct {
		name       string
		requests   int  // how often B asks
		letBefore  bool // A's driver lets go before Close (else after)
		wantReplys int
	}{
		{name: "one request, then the driver lets go", requests: 1, letBefore: true, wantReplys: 1},
		{name: "a repeated request is answered once", requests: 3, letBefore: true, wantReplys: 1},
		{name: "a release that ends after Close gets no reply", requests: 1, wantReplys: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld(t)
				rec := wd.record(t, jobB)
				holder := &fakeHolder{}
				hA := wd.handoff(t, handoffcore.Config{JobID: jobA, Bus: wd.bus.Endpoint(jobA), Presence: newFakePresence(wd.clk)})
				if err := hA.Register(driverName, handoffcore.Handlers{Release: holder.release}); err != nil {
					t.Fatal(err)
				}
				hA.Start()
				for range tc.requests {
					_ = wd.bus.Endpoint(jobB).Publish(t.Context(), jobA, messaging.Message{Type: messaging.TypeRequest,
						Driver: driverName, Key: playerKey, Requester: jobB, Token: "tok-1"})
					synctest.Wait()
				}
				if n := len(rec.messages()); n != 0 {
					t.Fatalf("%d replies before the driver let go", n)
				}
				if tc.letBefore {
					holder.let(playerKey)
					synctest.Wait()
				}
				if err := hA.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				holder.let(playerKey)
				synctest.Wait()
				if n := len(rec.messages()); n != tc.wantReplys {
					t.Errorf("%d replies, want %d", n, tc.wantReplys)
				}
			})
		})
	}
}
