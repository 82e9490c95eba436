package mcpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance, from
// npm, run by the Node 22 that npm's node package installs beside it, which
// the suite needs) drives the built berm binary over HTTP: every server
// scenario, the pending ones too, against the fixture programs of
// testdata/conformance. A scenario berm fails must be in the baseline with
// the feature it lacks; any other failure fails the test, and so does a
// listed scenario that passes, so that the list stays honest.

// conformanceDir holds the fixture programs and the baselines.
var conformanceDir = filepath.Join("testdata", "conformance")

func TestConformance(t *testing.T) {
	node := npmBin(t, "node")
	suite := npmBin(t, "conformance")
	version := suiteVersion(t, suite)
	berm := buildBerm(t, t.TempDir())
	root := t.TempDir()
	// test serves test_{tool}, the names the scenarios call; json serves
	// json_schema_2020_12_tool.
	for _, name := range []string{"test", "json"} {
		cmd := exec.Command(berm, "deploy", name, filepath.Join(conformanceDir, name+".wasm"))
		cmd.Env = bermEnv(root)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("berm deploy %s: %v\n%s", name, err, out)
		}
	}
	scenarios := listScenarios(t, node, suite)
	t.Logf("conformance %s under node %s: %d server scenarios", version, nodeVersion(t, node), len(scenarios))

	modes := []struct {
		name, baseline string
		// flags are berm serve's besides --addr.
		flags []string
	}{
		{"http", "expected-failures.yml", nil},
		{"stateless", "expected-failures-stateless.yml", []string{"--stateless"}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			baselinePath := filepath.Join(conformanceDir, m.baseline)
			baseline := readBaseline(t, baselinePath)
			for name := range baseline {
				if !slices.Contains(scenarios, name) {
					t.Errorf("%s lists %s, which conformance %s has no server scenario named", baselinePath, name, version)
				}
			}
			url := startBermHTTP(t, berm, root, m.flags...)
			run := runSuite(t, node, suite, url, baselinePath)

			// passed and expected (failed as listed) hold the baseline;
			// unexpected (failed, unlisted), stale (passed, listed) and
			// missing (not run) break it.
			var passed, expected, unexpected, stale, missing []string
			counts := map[string]int{}
			for _, name := range scenarios {
				checks, ok := run.results[name]
				if !ok {
					missing = append(missing, name)
					continue
				}
				var failed []conformanceCheck
				for _, c := range checks {
					counts[c.Status]++
					if c.failed() {
						failed = append(failed, c)
					}
				}
				reason, listed := baseline[name]
				switch {
				case len(failed) > 0 && listed:
					expected = append(expected, name)
				case len(failed) > 0:
					unexpected = append(unexpected, name)
					t.Errorf("scenario %s failed, and %s does not list it:%s", name, baselinePath, describeChecks(failed))
				case listed:
					stale = append(stale, name)
					t.Errorf("scenario %s passes: take it off %s (listed as: %s)", name, baselinePath, reason)
				default:
					passed = append(passed, name)
				}
			}
			t.Logf("berm serve %s: %d scenarios: %d passed, %d failed as listed, %d failed unlisted, %d listed but passed; checks: %d SUCCESS, %d FAILURE, %d WARNING, %d INFO\npassed: %s\nfailed as listed: %s",
				strings.Join(append([]string{"--addr 127.0.0.1:0"}, m.flags...), " "),
				len(scenarios), len(passed), len(expected), len(unexpected), len(stale),
				counts["SUCCESS"], counts["FAILURE"], counts["WARNING"], counts["INFO"],
				strings.Join(passed, " "), strings.Join(expected, " "))
			if len(missing) > 0 {
				t.Errorf("scenarios did not run (no checks.json): %s\nsuite output:\n%s", strings.Join(missing, " "), run.output)
			} else {
				t.Logf("suite output, from its summary:\n%s", run.summary())
			}
			// The suite holds the run to the baseline itself (exit 0 when
			// it holds): a disagreement is a misreading here.
			if held := len(unexpected)+len(stale) == 0; len(missing) == 0 && (run.exit == 0) != held {
				t.Errorf("conformance exited %d, while this test found the baseline held=%t\nsuite output:\n%s", run.exit, held, run.output)
			}
		})
	}
}

// conformanceCheck is one check of a scenario, as its checks.json holds it.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// failed reports whether the check fails its scenario: a WARNING does, as
// the suite's --expected-failures counts it.
func (c conformanceCheck) failed() bool { return c.Status == "FAILURE" || c.Status == "WARNING" }

// describeChecks is the failed checks with what the suite saw, the requests
// and responses it records among the details.
func describeChecks(checks []conformanceCheck) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "\n  %s %s: %s", c.Status, c.ID, c.ErrorMessage)
		if len(c.Details) > 0 {
			details := string(c.Details)
			if len(details) > 2000 {
				details = details[:2000] + "..."
			}
			fmt.Fprintf(&b, "\n    details: %s", details)
		}
	}
	return b.String()
}

// readBaseline reads an expected-failures file: the suite's YAML baseline,
// held to one form, "  - scenario  # reason" a line under "server:", so that
// every entry says why without a YAML parser here.
func readBaseline(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`^  - ([a-z0-9][a-z0-9/-]*) +# *(\S.*)$`)
	baseline := map[string]string{}
	server := false
	for i, line := range strings.Split(string(data), "\n") {
		switch m := entry.FindStringSubmatch(line); {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "server:" && !server:
			server = true
		case m != nil && server:
			if _, dup := baseline[m[1]]; dup {
				t.Fatalf("%s:%d: %s is listed twice", path, i+1, m[1])
			}
			baseline[m[1]] = m[2]
		default:
			t.Fatalf("%s:%d: %q: want \"server:\" then \"  - scenario  # reason\" lines, each with its reason", path, i+1, line)
		}
	}
	return baseline
}

// suiteVersion is the installed suite's version, from its package.json.
func suiteVersion(t *testing.T, suite string) string {
	t.Helper()
	// suite is node_modules/.bin/conformance, a link into the package.
	entry, err := filepath.EvalSymlinks(suite)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(entry), "..", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil || pkg.Version == "" {
		t.Fatalf("conformance's package.json: no version (%v)", err)
	}
	return pkg.Version
}

// nodeVersion is what node --version says.
func nodeVersion(t *testing.T, node string) string {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v (reinstall: %s)", node, err, npmInstall)
	}
	return strings.TrimSpace(string(out))
}

// listScenarios is the suite's server scenarios, in its order, from
// conformance list.
func listScenarios(t *testing.T, node, suite string) []string {
	t.Helper()
	out, err := exec.Command(node, suite, "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list --server: %v\n%s", err, out)
	}
	// "  - name [spec versions]"
	item := regexp.MustCompile(`^\s+- (\S+)`)
	var scenarios []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := item.FindStringSubmatch(sc.Text()); m != nil {
			scenarios = append(scenarios, m[1])
		}
	}
	if len(scenarios) == 0 {
		t.Fatalf("conformance list --server names no scenario:\n%s", out)
	}
	return scenarios
}

// suiteRun is one run of the suite over every server scenario.
type suiteRun struct {
	// results holds each scenario's checks.
	results map[string][]conformanceCheck
	// output is what the suite printed, without its colours.
	output string
	exit   int
}

// summary is the suite's output from its summary on.
func (r suiteRun) summary() string {
	if i := strings.Index(r.output, "=== SUMMARY ==="); i >= 0 {
		return r.output[i:]
	}
	return r.output
}

// runSuite runs every server scenario of the suite against url, one after
// the other (the whole suite takes about two seconds), holding the run to
// the baseline at baselinePath.
func runSuite(t *testing.T, node, suite, url, baselinePath string) suiteRun {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--suite", "all",
		"--expected-failures", baselinePath, "-o", dir)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	run := suiteRun{output: regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(out), "")}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("conformance server: timed out\n%s", run.output)
	case errors.As(err, &exit):
		run.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("conformance server: %v\n%s", err, run.output)
	}

	// Each scenario's checks are in server-{scenario}-{time}/checks.json.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)
	run.results = map[string][]conformanceCheck{}
	for _, e := range entries {
		m := name.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			t.Errorf("conformance wrote %s, not a scenario's results", e.Name())
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(data, &checks); err != nil {
			t.Errorf("scenario %s: checks.json: %v", m[1], err)
			continue
		}
		run.results[m[1]] = checks
	}
	return run
}
