package index

import "errors"

// Errors name what went wrong; each is wrapped with the object at fault.
var (
	// ErrReference: a reference has no path in an index (it does not
	// parse, it has an IPv6 host or a name Windows reserves), or names a
	// digest where a tag is wanted.
	ErrReference = errors.New("bad reference")
	// ErrPath: a file of an index that could leave it, or that no
	// reference maps to.
	ErrPath = errors.New("bad index path")
	// ErrInvalid: an entry the index may not hold.
	ErrInvalid = errors.New("invalid index entry")
	// ErrUnreachable: the index could not be cloned or fetched.
	ErrUnreachable = errors.New("index unreachable")
	// ErrSlow: a request to the index's server ran past its timeout, or
	// moved fewer bytes than the minimum rate (an answer that never came
	// included); the error names the host and the bound.
	ErrSlow = errors.New("index too slow")
	// ErrURL: an index URL that is neither https, http, file nor a local
	// path.
	ErrURL = errors.New("unsupported index URL")
	// ErrNotRepository: a publisher's directory that is not a git working
	// tree.
	ErrNotRepository = errors.New("not a git working tree")
	// ErrConflict: two indexes under one root disagree on a pinned
	// reference's layer.
	ErrConflict = errors.New("indexes disagree")
)
