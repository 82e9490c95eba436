// Package sandbox is what one deployment grants its program beyond the ABI:
// host directories (each mounted on an os.Root, read-only unless granted
// read-write), environment variables, the arguments and working directory a
// WASI program reads, and the network hosts berm.http may reach. Nothing is
// granted unless named; the zero Grants grant nothing.
//
// Grants are part of a deployment's record: they are stored with it, carried
// by the control API and shown by berm ls and berm inspect, so that every
// grant is visible before anything runs.
package sandbox
