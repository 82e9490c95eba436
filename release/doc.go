// Package release checks what `make release-snapshot` builds: its tests read
// the dist directories that `make release-test` names in BERM_RELEASE_DIST
// and BERM_RELEASE_DIST2 (two builds of one commit) and are skipped without
// them. The release itself is .goreleaser.yaml and the image builder in
// release/image; docs/release.md says how and why.
package release
