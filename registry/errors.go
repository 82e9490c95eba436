package registry

import "errors"

// Errors name what went wrong; each is wrapped with the reference at fault, as
// in "localhost:5000/echo:v1: not found".
var (
	// ErrReference: the reference does not parse, or names a digest where a
	// tag is needed.
	ErrReference = errors.New("bad reference")
	// ErrNotFound: no such repository, tag, manifest or blob.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the registry refused the credentials, or asked for some.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrManifest: the manifest is malformed, or of a type that is not an
	// image manifest (OCI or Docker schema 2).
	ErrManifest = errors.New("unsupported manifest")
	// ErrIndex: the reference names an image index (several images), not one.
	ErrIndex = errors.New("image index, not a single image")
	// ErrLayers: the image has no layer or more than one.
	ErrLayers = errors.New("not exactly one layer")
	// ErrNotWasm: the manifest or its layer is not of a WebAssembly type, or
	// the layer's bytes are not a WebAssembly module.
	ErrNotWasm = errors.New("not a WebAssembly image")
	// ErrTooLarge: the image is over the size limit.
	ErrTooLarge = errors.New("image over the size limit")
	// ErrDigest: bytes received (or held) do not match their digest.
	ErrDigest = errors.New("content does not match its digest")
	// ErrSlow: a request ran past Config.RequestTimeout, or moved fewer
	// bytes than Config.MinRate; the error names the host and the bound.
	ErrSlow = errors.New("registry too slow")
	// ErrUnreachable: no registry answered at the reference's host: no such
	// host, a refused connection, no route.
	ErrUnreachable = errors.New("registry unreachable")
)
