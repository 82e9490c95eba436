// Package replicas starts berm serve replicas and nginx in front of them as
// real processes on loopback, for deploy's tests and its benchmark. Its
// functions return errors and each process a Stop, so that a test wires them
// to t.Fatal and t.Cleanup and the benchmark to its own exit:
//
//	r, err := replicas.Start("r0", replicas.Options{Bin: bin, State: url, Root: dir})
//	defer r.Stop()
//	err = r.WaitReady(ctx, 2, 30*time.Second)
//	lb, err := replicas.StartNginx(replicas.NginxOptions{Dir: dir2, Upstreams: []string{r.Addr()}})
//	defer lb.Stop()
//
// Every process runs in a process group of its own, which Stop and Kill end
// whole, and gets SIGKILL when the program that started it dies, so that
// none outlives a test binary killed by go test's timeout, holding its port
// (NginxOptions.Fast's workers aside).
package replicas
