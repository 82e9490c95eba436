// Package bermhttp is net/http over berm.http: a program makes requests with
// Go's own client, and the host makes them for it, to the hosts its
// deployment grants.
//
//	client := &http.Client{Transport: bermhttp.Transport}
//	resp, err := client.Get("https://example.com/")
//
// The manifest declares "berm.http" in its syscalls. A request the host
// refuses (a host not granted, a bound passed, the network failing) is an
// error that wraps a *berm.RefusedError, whose message says why.
//
// It is a package of its own because net/http, once imported, adds 2 MB to
// every image: programs that do not reach the network keep it out.
package bermhttp
