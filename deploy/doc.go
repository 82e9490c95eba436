// Package deploy holds berm's deployment files (compose.yaml, k8s/,
// nginx.conf) and their tests, which drive berm serve as it is deployed for
// many users: replicas (real processes) sharing one PostgreSQL database,
// behind nginx (round robin), called by real MCP clients. The tests need
// PostgreSQL and nginx, which .ci/run installs; they skip, saying so, where
// either is missing, and under -short.
package deploy
