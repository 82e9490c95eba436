// Package registry moves berm programs to and from OCI registries, each as one
// image whose single layer is the program's bytes.
//
// A pushed image follows the CNCF TAG Runtime layout for wasm artifacts: the
// layer is the raw module (media type application/wasm, digest the sha256 of
// the file, so the layer digest is the program's identity), the config is
// application/vnd.wasm.config.v0+json, and the OCI manifest carries the
// program's .berm.abi JSON under the annotation [AnnotationABI], so that its
// tools can be read without fetching the layer. Pull accepts any single-layer
// wasm image and checks the digest of every byte it receives.
//
//	c, err := registry.New(&registry.Config{MaxImageSize: 32 << 20})
//	if err != nil {
//		return err
//	}
//	pushed, err := c.Push(ctx, "ghcr.io/org/example:v1", image, nil)
//	// pushed.Digest is the sha256 of image; pushed.ManifestDigest pins the push.
//
//	img, err := c.Pull(ctx, "ghcr.io/org/example:v1", &registry.PullOptions{
//		Have: store.Get, // a digest already held is not fetched again
//	})
//	if errors.Is(err, registry.ErrNotFound) {
//		// no such image
//	}
//	// img.Bytes hash to img.Digest; img.Resolved is host/repo@<manifest digest>.
//
// Every request is bounded: by Config.RequestTimeout, its body and retries
// included, and by Config.MinRate, the fewest bytes a second it may move over
// each Config.MinRateWindow (a wait for an answer counts as none), so that a
// registry that trickles or says nothing ends a pull with ErrSlow, naming the
// host and the bound, instead of holding it. A registry that cannot be reached
// is ErrUnreachable.
//
// Credentials are Docker's: ~/.docker/config.json (or $DOCKER_CONFIG) and the
// credential helpers it names, as Login and Logout keep them. Loopback
// registries (localhost, 127.0.0.0/8, ::1) are reached over plain HTTP, every
// other one over HTTPS unless Config.PlainHTTP says otherwise.
package registry
