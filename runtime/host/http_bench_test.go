package host_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// BenchmarkHTTPGet is a GET from a loopback server through berm.http (a
// call of testdata/http.wasm in the runtime), next to Go's net/http client
// making the same GET in process. Both keep connections alive between
// requests (berm.http keeps one client per program). The two alternate,
// one request each per iteration, so that both meet the same load; the
// metrics are the medians of each and their ratio.
//
//	go test ./runtime/host -run '^$' -bench HTTPGet -benchtime 2000x
func BenchmarkHTTPGet(b *testing.B) {
	for _, size := range []int{16, 64 << 10} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			body := strings.Repeat("x", size)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, body)
			}))
			defer srv.Close()
			rt := deployHTTP(b, host.HTTPConfig{}, runtime.Limits{}, sandbox.Grants{Hosts: []string{grantOf(srv)}})
			args := []byte(`{"x":"` + hex.EncodeToString(frame("GET", srv.URL+"/", "", "")) + `"}`)
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			ctx := context.Background()

			viaBerm := func() {
				out, err := rt.Call(ctx, "web", "fetch", args)
				if err != nil || !strings.HasPrefix(string(out.Result), "ok:") {
					b.Fatalf("berm.http: %q, %v", out.Result, err)
				}
			}
			viaGo := func() {
				resp, err := client.Get(srv.URL + "/")
				if err != nil {
					b.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || len(got) != size {
					b.Fatalf("net/http: %d bytes, %v", len(got), err)
				}
			}
			viaBerm() // the first connection of each, outside the timing
			viaGo()
			bermTimes := make([]time.Duration, 0, b.N)
			goTimes := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				viaBerm()
				mid := time.Now()
				viaGo()
				bermTimes = append(bermTimes, mid.Sub(start))
				goTimes = append(goTimes, time.Since(mid))
			}
			mb, mg := median(bermTimes), median(goTimes)
			b.ReportMetric(float64(mb.Microseconds()), "berm-µs")
			b.ReportMetric(float64(mg.Microseconds()), "nethttp-µs")
			b.ReportMetric(float64(mb)/float64(mg), "ratio")
			b.ReportMetric(float64(mb-mg*3/2)/1e3, "over-1.5x-µs")
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}
