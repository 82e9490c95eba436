package index_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/registry/index/indextest"
)

// benchSizes are the index sizes the benchmarks grow through.
var benchSizes = []int{1000, 10000, 100000}

// benchQuery is the query of every benchmark, and its words for git grep.
const benchQuery = "compress pdf quickly"

// benchCorpus builds the corpus of n generated programs, as a clone's
// snapshot holds it.
func benchCorpus(b *testing.B, n int) *index.Corpus {
	b.Helper()
	c, err := index.BuildCorpus(indextest.Generate("ghcr.io", n))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkLoad is the load of a snapshot: the header a search reads
// before it ranks.
func BenchmarkLoad(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "snapshot")
			if err := index.WriteSnapshot(path, benchCorpus(b, n)); err != nil {
				b.Fatal(err)
			}
			info, _ := os.Stat(path)
			b.SetBytes(info.Size())
			b.ResetTimer()
			for b.Loop() {
				if _, err := index.OpenSnapshot(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRank is the ranking of a loaded snapshot: reading the lengths,
// the postings of the query's terms and the results' lines, and scoring.
func BenchmarkRank(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "snapshot")
			if err := index.WriteSnapshot(path, benchCorpus(b, n)); err != nil {
				b.Fatal(err)
			}
			s, err := index.OpenSnapshot(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				hits, err := index.SearchSnapshot(s, benchQuery, 10)
				if err != nil || len(hits) == 0 {
					b.Fatal(err, hits)
				}
			}
		})
	}
}

// BenchmarkCommand runs `berm search` as a whole process over a warm clone
// of an index of n programs, next to `git grep -i` of the same words in the
// same clone (checked out for it), and reports the medians and their ratio.
// It needs the git binary, which berm itself never does. 100,000 programs
// only with BERM_BENCH_100K=1: the clone takes minutes to make.
//
//	go test ./registry/index -run '^$' -bench Command -benchtime 20x
func BenchmarkCommand(b *testing.B) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		b.Skip("no git binary to compare with")
	}
	bin := filepath.Join(b.TempDir(), "berm")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range benchSizes {
		if n > 10000 && os.Getenv("BERM_BENCH_100K") == "" {
			continue
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := b.TempDir()
			for p, content := range indextest.Generate("ghcr.io", n) {
				full := filepath.Join(src, filepath.FromSlash(p))
				os.MkdirAll(filepath.Dir(full), 0o755)
				if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			git := func(dir string, args ...string) {
				// No background gc: it would still be writing when the
				// temporary directory is removed.
				cmd := exec.Command(gitBin, append([]string{"-C", dir, "-c", "gc.auto=0"}, args...)...)
				cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			git(src, "init", "-q", "-b", "main")
			git(src, "add", "-A")
			git(src, "commit", "-q", "-m", "index")
			root := b.TempDir()
			search := exec.Command(bin, "search", "--index", src, benchQuery)
			search.Env = append(os.Environ(), "BERM_ROOT="+root, "BERM_SERVER=", "BERM_INDEX=")
			start := time.Now()
			if out, err := search.CombinedOutput(); err != nil {
				b.Fatalf("first search: %v\n%s", err, out)
			}
			b.Logf("%d programs: first search (clone and read) %v", n, time.Since(start).Round(time.Millisecond))
			ix, err := index.Open(context.Background(), root, src, nil)
			if err != nil {
				b.Fatal(err)
			}
			// berm reads the objects; git grep gets the working tree it
			// reads fastest.
			git(ix.Dir, "reset", "-q", "--hard")

			var bermTimes, grepTimes []time.Duration
			b.ResetTimer()
			for b.Loop() {
				cmd := exec.Command(bin, "search", "--index", src, benchQuery)
				cmd.Env = search.Env
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				bermTimes = append(bermTimes, time.Since(start))

				args := []string{"-C", ix.Dir, "grep", "-i"}
				for _, w := range strings.Fields(benchQuery) {
					args = append(args, "-e", w)
				}
				start = time.Now()
				if err := exec.Command(gitBin, args...).Run(); err != nil {
					b.Fatal(err)
				}
				grepTimes = append(grepTimes, time.Since(start))
			}
			bm, gm := median(bermTimes), median(grepTimes)
			b.ReportMetric(float64(bm.Microseconds())/1000, "berm-ms")
			b.ReportMetric(float64(gm.Microseconds())/1000, "gitgrep-ms")
			b.ReportMetric(float64(bm)/float64(gm), "ratio")
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
