// Package registrytest starts real OCI registries for tests: Debian's
// docker-registry (github.com/distribution/distribution) on loopback, with
// or without htpasswd auth, and finds the oras CLI for cross-checks. Without
// them, tests under -short are skipped and other tests fail, naming what to
// install (make deps installs both).
//
//	host := registrytest.Start(t, nil) // "127.0.0.1:PORT", stopped when t ends
package registrytest
