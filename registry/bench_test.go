package registry

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkVsOras pushes and deploys a 2 MiB program on a loopback registry
// with berm and pushes and pulls it with the oras CLI in the same run, and
// reports the median of each and their ratios (target: berm within 1.2x of
// oras).
//
// berm is measured twice: this package in this process, as a host embedding
// it runs (a warm client), and the berm binary, built here, as a user runs
// it: `berm push REF FILE` and `berm deploy NAME REF` into a fresh root, which
// pulls, checks the digest, validates, compiles and records the program; the
// ratios compare the binary with oras. Every round pushes to new
// repositories, so that every blob is uploaded, all three pull the same image,
// and the order of the three rotates from round to round.
//
//	go test -run '^$' -bench VsOras -benchtime 20x ./registry
func BenchmarkVsOras(b *testing.B) {
	orasBin(b)
	host := startRegistry(b, registryOptions{})
	dir := b.TempDir()
	bermBin := filepath.Join(dir, "berm")
	build := exec.Command("go", "build", "-o", bermBin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as berm ships
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build berm: %v\n%s", err, out)
	}
	image := padded(readEcho(b), 2<<20, 7)
	file := filepath.Join(dir, "program.wasm")
	if err := os.WriteFile(file, image, 0o644); err != nil {
		b.Fatal(err)
	}
	dockerConfig := b.TempDir()
	c := newClient(b, &Config{DockerConfig: dockerConfig})
	run := func(bin string, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dockerConfig, "BERM_ROOT="+filepath.Join(dir, "root-"+fmt.Sprint(time.Now().UnixNano())))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
	}
	oras := orasBin(b)

	type contender struct {
		name       string
		push, pull func(i int, ref string)
		pushes     []time.Duration
		pulls      []time.Duration
	}
	contenders := []*contender{
		{name: "berm", push: func(i int, ref string) {
			if _, err := c.Push(b.Context(), ref, image, nil); err != nil {
				b.Fatal(err)
			}
		}, pull: func(i int, ref string) {
			img, err := c.Pull(b.Context(), ref, nil)
			if err != nil || !bytes.Equal(img.Bytes, image) {
				b.Fatal("pull:", err)
			}
		}},
		{name: "process", push: func(i int, ref string) {
			run(bermBin, "push", ref, file)
		}, pull: func(i int, ref string) {
			run(bermBin, "deploy", "bench", ref)
		}},
		{name: "oras", push: func(i int, ref string) {
			run(oras, "push", "--plain-http", ref, "program.wasm:application/wasm")
		}, pull: func(i int, ref string) {
			run(oras, "pull", "--plain-http", "-o", filepath.Join(dir, fmt.Sprintf("oras-%d", i)), ref)
		}},
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range contenders {
			ct := contenders[(i+k)%len(contenders)]
			ref := fmt.Sprintf("%s/bench/%s-%d:v1", host, ct.name, i)
			start := time.Now()
			ct.push(i, ref)
			ct.pushes = append(ct.pushes, time.Since(start))
		}
		pulled := fmt.Sprintf("%s/bench/berm-%d:v1", host, i)
		for k := range contenders {
			ct := contenders[(i+k)%len(contenders)]
			start := time.Now()
			ct.pull(i, pulled)
			ct.pulls = append(ct.pulls, time.Since(start))
		}
	}
	b.StopTimer()

	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	m := map[string][2]float64{}
	for _, ct := range contenders {
		m[ct.name] = [2]float64{median(ct.pushes), median(ct.pulls)}
		b.ReportMetric(m[ct.name][0], ct.name+"-push-ms")
		b.ReportMetric(m[ct.name][1], ct.name+"-pull-ms")
	}
	pushRatio, pullRatio := m["process"][0]/m["oras"][0], m["process"][1]/m["oras"][1]
	b.ReportMetric(pushRatio, "push-ratio")
	b.ReportMetric(pullRatio, "pull-ratio")
	b.Logf("%d rounds, %d-byte program, medians:\n"+
		"                   in-process  berm binary  oras CLI  berm binary / oras\n"+
		"  push             %7.1f ms   %7.1f ms  %6.1f ms  %.2fx\n"+
		"  pull (berm deploy) %5.1f ms   %7.1f ms  %6.1f ms  %.2fx",
		b.N, len(image),
		m["berm"][0], m["process"][0], m["oras"][0], pushRatio,
		m["berm"][1], m["process"][1], m["oras"][1], pullRatio)
}

// BenchmarkPullBounds pulls a 2 MiB program from a loopback registry with
// the request bounds (the defaults) and without them, alternately in the
// same run, and reports the median of each: the bounds cost a timer or two
// and a counter per request.
//
//	go test -run '^$' -bench PullBounds -benchtime 100x ./registry
func BenchmarkPullBounds(b *testing.B) {
	host := startRegistry(b, registryOptions{})
	image := padded(readEcho(b), 2<<20, 8)
	ref := host + "/bench/bounds:v1"
	if _, err := newClient(b, nil).Push(b.Context(), ref, image, nil); err != nil {
		b.Fatal(err)
	}
	clients := map[string]*Client{
		"bounded":   newClient(b, nil),
		"unbounded": newClient(b, &Config{RequestTimeout: -1, MinRate: -1}),
	}
	times := map[string][]time.Duration{}
	order := []string{"bounded", "unbounded"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range order {
			name := order[(i+k)%len(order)]
			start := time.Now()
			if img, err := clients[name].Pull(b.Context(), ref, nil); err != nil || len(img.Bytes) != len(image) {
				b.Fatal("pull:", err)
			}
			times[name] = append(times[name], time.Since(start))
		}
	}
	b.StopTimer()
	for _, name := range order {
		d := times[name]
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2])/float64(time.Millisecond), name+"-ms")
	}
}
