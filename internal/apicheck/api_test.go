package apicheck_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/apicheck"
)

var update = flag.Bool("update", false, "rewrite api/*.txt from the code")

// public are the packages whose exported API is recorded in api/<name>.txt.
var public = []string{"datadriver", "presence", "lockhandoff", "messaging", "transactions", "sampling"}

// TestAPIIsRecorded fails when a public package's exported API differs from
// api/<package>.txt: a new, changed or removed exported name must change
// that file in the same commit (go test ./internal/apicheck -update).
func TestAPIIsRecorded(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range public {
		t.Run(pkg, func(t *testing.T) {
			got, err := apicheck.List(filepath.Join(root, pkg))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(root, "api", pkg+".txt")
			if *update {
				if err := os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (record it: go test ./internal/apicheck -update)", err)
			}
			want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			var added, removed []string
			for _, l := range got {
				if !slices.Contains(want, l) {
					added = append(added, l)
				}
			}
			for _, l := range want {
				if !slices.Contains(got, l) {
					removed = append(removed, l)
				}
			}
			if len(added)+len(removed) > 0 {
				var diff strings.Builder
				for _, l := range added {
					diff.WriteString("\n+ " + l)
				}
				for _, l := range removed {
					diff.WriteString("\n- " + l)
				}
				t.Errorf("the exported API of %s is not what api/%s.txt records:%s\n"+
					"if the change is meant, record it: go test ./internal/apicheck -update", pkg, pkg, diff.String())
			}
		})
	}
}
