/* common/file.c -- files as the library meets them: opened only when regular, never
 * blocking on a FIFO (datasets, checkpoints, rendezvous files); a small file written
 * whole, under a temporary name renamed into place (a reader sees all of it or none),
 * synced when it must survive a crash (comm/store.c's rendezvous, train/export.c). */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rf-internal.h"

void rf__sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
}

int rf__write_whole(const char *path, const char *tmp, const void *buf, size_t len, int sync,
		    const char **step)
{
	const char *p = buf;
	size_t off = 0;
	int fd, e = 0;

	/* a new file: a stale one (a crash) is removed first, and whatever is at the name
	 * then -- a symbolic link planted in a shared directory, say -- fails O_EXCL
	 * instead of being written through */
	*step = "create";
	unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
		return -errno;
	*step = "write";
	while (off < len && !e) {
		ssize_t n = write(fd, p + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			e = n < 0 ? errno : ENOSPC;
		else
			off += (size_t)n;
	}
	if (!e && sync && fsync(fd) < 0) {
		*step = "sync";
		e = errno;
	}
	if (close(fd) < 0 && !e) {
		*step = "write";
		e = errno;
	}
	if (!e && path && rename(tmp, path) < 0) {
		*step = "rename";
		e = errno;
	}
	if (e) {
		unlink(tmp);
		return -e;
	}
	if (sync && path)
		rf__sync_dir(path);
	return 0;
}

const char *rf__ftype(unsigned m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	default: return "a file of unknown type";
	}
}

static int rf__refuse(const struct stat *st, int *not_reg)
{
	*not_reg = 1;
	return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
}

int rf__open_regular(const char *path, int flags, unsigned mode, struct stat *st, int *not_reg)
{
	int fd, fl;

	*not_reg = 0;
	if (stat(path, st) == 0 && !S_ISREG(st->st_mode))
		return rf__refuse(st, not_reg);
	do
		fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, (mode_t)mode);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st->st_mode)) { /* it changed after the stat */
		close(fd);
		return rf__refuse(st, not_reg);
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || ((flags & O_NONBLOCK) == 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}
