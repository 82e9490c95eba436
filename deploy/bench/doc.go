// Command bench measures berm serve replicas sharing one PostgreSQL database
// behind nginx (round robin), next to one replica on the embedded root, in
// one run on one machine:
//
//   - calls per second of the echo program (no data) and of the kv
//     program's get (one read of its data) through nginx, with 1, 2 and 3
//     replicas on PostgreSQL and 1 on a root directory, each the median over
//     rounds, with its ratio to the root's;
//   - the statements each call sends to the database (target: 0 for echo, 1
//     for a get), counted by PostgreSQL itself (pg_stat_statements) over the
//     measure, less what the idle replicas send meanwhile (the periodic
//     resync), divided by the calls;
//   - the time from a deploy through one replica's control API to
//     tools/list_changed on a client of another replica, p50 and p99.
//
// bench.sh beside it builds berm, starts a private PostgreSQL cluster with
// pg_stat_statements loaded and runs it (make bench-replicas). Every server
// listens on loopback; every load is bounded in time.
package main
