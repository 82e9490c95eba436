package mcpserve

import (
	"slices"
	"sync"
)

// Calls past MaxConcurrent wait for a worker, and what waits is bounded:
// a call queued without a bound, and past its deadline, let one POST of 1 MiB
// queue 13,500 calls (hours of worker time) and 60 disconnected POSTs hold
// 432 MB. So at most MaxWaiting calls wait, a session at most a quarter of
// them (over stdio, its one client all of them), and past either a call is
// refused at once (CodeBusy), but when the server's bound is met by a
// session that has more waiting than the caller's, whose last call gives up
// its place; a call waits at most its deadline; and a worker that frees
// takes the next session's call in turn, not the next call of the session
// that queued the most (a fresh session's echo waited 14 s behind one
// batch).

// queue holds the calls waiting for a worker, one line per owner (an MCP
// session: over HTTP a stateful session or a stateless POST, over stdio the
// client), taken in turn.
type queue struct {
	max int // calls waiting, server-wide

	mu    sync.Mutex
	free  int // workers idle
	n     int // calls waiting
	lines map[any]*line
	turn  []*line // lines with a call waiting, in the order they take turns
	next  int     // index in turn of the next line to take from
}

// line is one owner's calls waiting, oldest first.
type line struct {
	owner any
	jobs  []*job
}

func newQueue(workers, max int) *queue {
	return &queue{max: max, free: workers, lines: map[any]*line{}}
}

// errBusy says which bound refused a call.
type errBusy struct {
	server bool // the server's; else the owner's
	n      int  // calls waiting under that bound
}

// enqueue gives j a worker now (true), or queues it under owner (false), or
// refuses it: the server has max calls waiting, or owner perOwner.
func (q *queue) enqueue(j *job, owner any, perOwner int) (bool, *errBusy) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.free > 0 {
		q.free--
		return true, nil
	}
	l := q.lines[owner]
	waiting := 0
	if l != nil {
		waiting = len(l.jobs)
	}
	if waiting >= perOwner && perOwner < q.max { // over stdio, the one owner's bound is the server's
		return false, &errBusy{n: waiting}
	}
	if q.n >= q.max && !q.bumpLocked(waiting) {
		return false, &errBusy{server: true, n: q.n}
	}
	if l == nil {
		l = &line{owner: owner}
		q.lines[owner] = l
	}
	if len(l.jobs) == 0 {
		q.turn = append(q.turn, l)
	}
	l.jobs = append(l.jobs, j)
	j.line, j.started = l, make(chan struct{})
	q.n++
	return false, nil
}

// bumpLocked makes room, at the server's bound, for a call of an owner with
// waiting calls waiting: the last call of the line with the most, if that
// has more than one more, gives up its place (it is refused as if it had
// come to a full queue). Not one more: lines of one call each would then
// take each other's places, the call refused coming back to take another's
// (a newcomer among 8 sessions of one call each, retrying, was refused as
// before, and the queue churned 80 refusals a second). It reports whether
// it made room.
func (q *queue) bumpLocked(waiting int) bool {
	var most *line
	for _, l := range q.turn {
		if most == nil || len(l.jobs) > len(most.jobs) {
			most = l
		}
	}
	if most == nil || len(most.jobs) <= waiting+1 {
		return false
	}
	n := q.n
	last := q.leaveLocked(most, len(most.jobs)-1)
	last.bumped = &errBusy{server: true, n: n}
	close(last.started)
	return true
}

// withdraw takes j out of the queue, unless a worker has taken it already,
// or it gave up its place to another (false): then j.started is closed.
func (q *queue) withdraw(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := j.line
	if l == nil {
		return false
	}
	if i := slices.Index(l.jobs, j); i >= 0 {
		q.leaveLocked(l, i)
	}
	return true
}

// done is a worker's after each call: the next call waiting, taken in turn,
// which the worker runs, or nil when none waits (the worker is idle).
func (q *queue) done() *job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.turn) == 0 {
		q.free++
		return nil
	}
	if q.next >= len(q.turn) {
		q.next = 0
	}
	l := q.turn[q.next]
	last := len(l.jobs) == 1
	j := q.leaveLocked(l, 0)
	if !last { // else the next line moves into its place in turn
		q.next++
	}
	close(j.started)
	return j
}

// leaveLocked takes the call at i out of line l, which retires when it
// was its last, and returns it.
func (q *queue) leaveLocked(l *line, i int) *job {
	j := l.jobs[i]
	l.jobs = slices.Delete(l.jobs, i, i+1) // clears what it leaves behind
	j.line = nil
	q.n--
	if len(l.jobs) == 0 {
		q.retireLocked(l)
	}
	return j
}

// retireLocked drops a line whose last call has left.
func (q *queue) retireLocked(l *line) {
	delete(q.lines, l.owner)
	for i, t := range q.turn {
		if t == l {
			q.turn = append(q.turn[:i], q.turn[i+1:]...)
			if i < q.next {
				q.next--
			}
			return
		}
	}
}

// waiting is the number of calls waiting.
func (q *queue) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
