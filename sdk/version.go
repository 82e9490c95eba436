package berm

// Version is the version of this SDK; `berm version` prints it beside the
// ABI version it speaks (ABIVersion).
const Version = "0.1.0"

// ABIVersion is the version of ABI.md this SDK speaks.
const ABIVersion = 0
