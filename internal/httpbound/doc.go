// Package httpbound bounds an HTTP request's time and rate: a transport
// that ends a request running past a timeout, or moving fewer bytes a
// second than a minimum over a window, with an error that names the host
// and the bound. It is what keeps a server that trickles a byte at a time,
// or never answers, from holding its client for ever: berm's registry
// client and its index's clones both go through it.
//
//	errSlow := errors.New("registry too slow")
//	hc := &http.Client{Transport: &httpbound.Transport{Limits: httpbound.Defaults(), Err: errSlow}}
//	resp, err := hc.Get(url) // and reads of resp.Body
//	if errors.Is(err, errSlow) {
//		// "HOST: no answer in 20s (the minimum rate's window): registry too slow"
//	}
package httpbound
