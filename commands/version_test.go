package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestVersionStamped shows what a release prints: the version, commit and
// date its build stamped in with -ldflags -X (.goreleaser.yaml), in text and
// in --json. Not parallel: it sets the variables the linker would.
func TestVersionStamped(t *testing.T) {
	saved := [3]string{Version, Commit, Date}
	t.Cleanup(func() { Version, Commit, Date = saved[0], saved[1], saved[2] })
	Version, Commit, Date = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"

	var text bytes.Buffer
	if err := runVersion(context.Background(), &env{stdout: &text}, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"berm v1.2.3", "rev  " + Commit, "date " + Date, "abi  0"} {
		if !strings.Contains(text.String(), line+"\n") {
			t.Errorf("version output lacks %q:\n%s", line, text.String())
		}
	}

	var js bytes.Buffer
	if err := runVersion(context.Background(), &env{stdout: &js}, true); err != nil {
		t.Fatal(err)
	}
	var got versionOutput
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != Version || got.Commit != Commit || got.Date != Date {
		t.Errorf("version --json = %+v, want version %s, commit %s, date %s", got, Version, Commit, Date)
	}
}
