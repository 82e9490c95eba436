// fsops.c: a WASI command (wasi-libc) that tries one file-system operation,
// for the sandbox's escape tests. The same interface as fsops/main.go:
//
//	fsops OP PATH [PATH2]
//
// It prints what it read and exits 0, or exits with the WASI errno (errno in
// wasi-libc is WASI's numbering). Unlike Go's os package, wasi-libc passes
// "..", resolved only against the longest matching preopen, to the host.
// Also "openat": PATH is a directory, PATH2 is opened relative to it.
// build.sh beside it builds fsops_c.wasm.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(void) { return errno ? errno : 125; }

static int cat(int fd) {
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, stdout);
	int r = n < 0 ? fail() : 0;
	close(fd);
	return r;
}

int main(int argc, char **argv) {
	if (argc < 3) return 125;
	const char *op = argv[1], *p = argv[2], *q = argc > 3 ? argv[3] : "";
	int fd;
	if (!strcmp(op, "read")) {
		if ((fd = open(p, O_RDONLY)) < 0) return fail();
		return cat(fd);
	} else if (!strcmp(op, "openat")) {
		int dir = open(p, O_RDONLY | O_DIRECTORY);
		if (dir < 0) return fail();
		if ((fd = openat(dir, q, O_RDONLY)) < 0) return fail();
		return cat(fd);
	} else if (!strcmp(op, "write")) {
		if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) return fail();
		if (write(fd, "written by fsops", 16) != 16) return fail();
		return close(fd) ? fail() : 0;
	} else if (!strcmp(op, "create")) {
		if ((fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) return fail();
		return close(fd) ? fail() : 0;
	} else if (!strcmp(op, "append")) {
		if ((fd = open(p, O_WRONLY | O_APPEND)) < 0) return fail();
		if (write(fd, "appended by fsops", 17) != 17) return fail();
		return close(fd) ? fail() : 0;
	} else if (!strcmp(op, "truncate")) {
		return truncate(p, 0) ? fail() : 0;
	} else if (!strcmp(op, "rename")) {
		return rename(p, q) ? fail() : 0;
	} else if (!strcmp(op, "unlink")) {
		return unlink(p) ? fail() : 0;
	} else if (!strcmp(op, "rmdir")) {
		return rmdir(p) ? fail() : 0;
	} else if (!strcmp(op, "mkdir")) {
		return mkdir(p, 0755) ? fail() : 0;
	} else if (!strcmp(op, "utimes")) {
		struct timespec ts[2] = {{1, 0}, {1, 0}};
		return utimensat(AT_FDCWD, p, ts, 0) ? fail() : 0;
	} else if (!strcmp(op, "symlink")) {
		return symlink(p, q) ? fail() : 0;
	} else if (!strcmp(op, "link")) {
		return link(p, q) ? fail() : 0;
	} else if (!strcmp(op, "readlink")) {
		char buf[4096];
		ssize_t n = readlink(p, buf, sizeof buf);
		if (n < 0) return fail();
		fwrite(buf, 1, (size_t)n, stdout);
		return 0;
	} else if (!strcmp(op, "ls")) {
		DIR *d = opendir(p);
		if (!d) return fail();
		struct dirent *e;
		while ((e = readdir(d))) printf("%s\n", e->d_name);
		return closedir(d) ? fail() : 0;
	} else if (!strcmp(op, "stat")) {
		struct stat st;
		if (stat(p, &st)) return fail();
		printf("%o %lld\n", (unsigned)st.st_mode, (long long)st.st_size);
		return 0;
	}
	return 125;
}
