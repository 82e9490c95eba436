// Command image builds berm's container image from a release's linux
// binaries, without a container daemon: FROM scratch, the static binary, the
// CA roots, a non-root user, `berm serve` on all interfaces with its root at
// the volume /data. It writes an OCI image layout (an index for linux/amd64
// and linux/arm64) and, given -push, pushes it. The same release and
// SOURCE_DATE_EPOCH give the same digest. docs/release.md says why it is
// built this way.
//
//	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) go run ./release/image \
//		-dist release/dist -out release/dist/image [-push ghcr.io/berm-dev/berm:v1.2.3]
package main
