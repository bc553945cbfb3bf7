/* tools/cli.h -- command-line helpers shared by the tools (rf-train, rf-pack,
 * rf-iobench): strict number parsing and path checks that never block.
 *
 * Numbers: strtoull and strtod skip leading white space and take a sign, so " -1"
 * would parse as 2^64-1; these take digits only (a float: digits, '.', an exponent)
 * and say -1 for anything else, out of range included.
 *
 * Paths: open() of a FIFO blocks until the other end opens, so a path is looked at
 * with stat() first and opened with O_NONBLOCK, then fstat'd; anything but a regular
 * file (or a block device where the caller allows one) is refused. The reason goes
 * into `why` as "PATH: what is wrong, what was expected", one line, no newline.
 *
 * Output: JSON has no NaN or Infinity (rf_cli_json_num writes null for them), and a
 * program whose stdout could not be written (a full disk, /dev/full, a closed pipe's
 * EIO) must not exit 0 (rf_cli_check_stdout, registered first thing in main).
 * Implemented in cli.c (linked into every tool as the rf-cli library); nothing
 * allocated. */
#ifndef RF_TOOLS_CLI_H
#define RF_TOOLS_CLI_H

/* what the tools use beside these helpers comes with them (as it did when this was
 * a header-only file) */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <ringflow/log.h>

/* One line on stderr: "PROG: " and the message, its control characters (a newline in
 * a file name or an option's value) written as \n or \xNN so that it stays one line. */
void rf_cli_say(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The environment variables the library reads later, checked before anything starts
 * so that a bad one is said once, naming itself, not as a failure of whatever first
 * reads it (an http:// --data): RF_HTTP_TIMEOUT_MS. 0, or 1 (the exit status) said. */
int rf_cli_check_env(const char *prog);

/* The tools' log sink: the library's warnings as "ringflow: MSG" lines on stderr.
 * Install it with rf_log_set(rf_cli_log_stderr, NULL) first thing in main(). */
void rf_cli_log_stderr(enum rf_log_level level, const char *msg, void *user);

/* Decimal digits only, in [min, max]. 0 and *out set, or -1. */
int rf_cli_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A plain decimal number: digits with an optional '.' and exponent ("0.05", "1e-3",
 * ".5"); no sign, white space, hex, inf or nan. Finite, in [min, max]. */
int rf_cli_double(const char *s, double min, double max, double *out);

/* "a directory", "a FIFO", ... for the article-less messages. */
const char *rf_cli_ftype(mode_t m);

#define RF_CLI_ALLOW_BLK 1u /* a block device is as good as a regular file */

int rf_cli_type_ok(mode_t m, unsigned flags);

const char *rf_cli_wanted(unsigned flags);

/* An existing input: it is there, and a regular file (or a block device). */
int rf_cli_check_input(const char *path, unsigned flags, char *why, size_t len);

/* The directory part of path ("." for none) into dir; the last component's offset. */
size_t rf_cli_dirname(const char *path, char *dir, size_t len);

/* A path to be written: not empty, not ending in '/', its directory exists, is a
 * directory and may be written; if the path exists it is a regular file (or a block
 * device). *exists says whether it does. Nothing is created. */
int rf_cli_check_output(const char *path, unsigned flags, int *exists, char *why,
				      size_t len);

/* A URL of a scheme the tools do not read: "SCHEME://..." (RFC 3986's scheme
 * characters) other than http://, whose scheme is copied into scheme. 1 for such a
 * URL, 0 for anything else (http://, a path). */
int rf_cli_other_scheme(const char *s, char *scheme, size_t len);

/* What the later write will do, tried now (after rf_cli_check_output, whose
 * access() calls a root process passes where the write then fails: /proc, a
 * read-only mount): an existing path opened for writing (not truncated) and closed;
 * for a new one, an unnamed file (O_TMPFILE) made in its directory, so that no name
 * is ever left there, even by a kill -9 (a checkpoint's directory holds the
 * checkpoint and nothing else); only where the filesystem cannot make unnamed files,
 * created by name and removed at once (another process's creating it meanwhile is no
 * failure). 0, or -1 with `why` "PATH: cannot create: REASON" or "PATH: cannot open
 * for writing: REASON". */
int rf_cli_probe_write(const char *path, char *why, size_t len);

/* A directory the program will create (mkdir), tried now as rf_cli_probe_write tries
 * a new file: an unnamed file in its parent, else created and removed again. 0 (also
 * where DIR exists), or -1 with `why` "DIR: cannot create: REASON". */
int rf_cli_probe_mkdir(const char *dir, char *why, size_t len);

/* RF_TRACE, where it is set: the engine writes its trace there when the run ends, so
 * it is checked now as an output option is (rf_cli_check_output, rf_cli_probe_write);
 * a refusal is one line naming RF_TRACE. 0, or 1 (the exit status). */
int rf_cli_check_trace_env(const char *prog);

/* open() that cannot block on a FIFO: stat, open with O_NONBLOCK, fstat, refuse what is
 * not a regular file (or a block device), then clear O_NONBLOCK (io_uring would give
 * -EAGAIN instead of waiting on a non-blocking file). Returns the fd (O_CLOEXEC) or
 * -errno with `why` set; *st is the fstat of the open file. */
int rf_cli_open(const char *path, int oflags, mode_t mode, unsigned flags,
			      struct stat *st, char *why, size_t len);

/* Catch SIGINT, SIGTERM and SIGHUP with handler (a tool that must remove what it
 * created before it dies). A signal ignored when the program started stays ignored
 * (nohup's SIGHUP, SIGINT in a shell's background job); SA_RESTART, so that a slow
 * call interrupted in another thread is resumed, not failed with EINTR. */
void rf_cli_on_signals(void (*handler)(int));

/* Whether two paths name the same file: both exist with the same device and inode, or
 * (one yet to be created) the same name in the same directory; trailing slashes off
 * ("q/" names "q"). */
int rf_cli_same_file(const char *a, const char *b);

/* Whether writing path writes inside directory dir (or is dir): path's directory
 * resolved (realpath) with its own name as it stands -- a link there is replaced or
 * written through -- or, where path exists, path resolved (a link elsewhere to a file
 * in dir); trailing slashes off ("new/" names "new"), so that links, ".." and
 * slashes do not hide it. 0 where dir is not an existing directory. An output inside
 * an input folder is refused: the folder would be read as it is written. */
int rf_cli_inside(const char *path, const char *dir);

/* What getopt_long's '?' or ':' was about, for the one-line refusal. before: optind
 * just before that getopt_long call. The element it was reading is the one it stepped
 * past, or (inside a cluster of short options, "-xy") the one it is still in: a long
 * option there ("--name[=value]") puts "--name" into name (the option's full name where
 * getopt knows which it was), a short one "-c" -- never a neighbouring argument, which
 * argv[optind - 1] can be. Returns RF_CLI_OPT_UNKNOWN (an unknown short option, or an
 * unknown or ambiguous long one), RF_CLI_OPT_NO_VALUE (a value given to a flag) or
 * RF_CLI_OPT_NEEDS_VALUE (a value missing). */
enum { RF_CLI_OPT_UNKNOWN, RF_CLI_OPT_NO_VALUE, RF_CLI_OPT_NEEDS_VALUE };
int rf_cli_bad_opt(int ret, int before, int argc, char **argv,
				 const char *shortopts, const struct option *lo, char *name,
				 size_t len);

/* A JSON number: v as fmt prints it, or null where v is NaN or infinite (JSON has
 * neither; Python's json module would read "-nan" as an error). */
void rf_cli_json_num(FILE *f, const char *fmt, double v);

/* At exit (a return from main or exit()), flush and close stdout; where that or an
 * earlier write to it failed, say "PROG: stdout: REASON" and make the exit status 1,
 * so that `tool --json > file` on a full disk does not look like a success. Call once,
 * first thing in main. */
/* First thing in main: writes past RLIMIT_FSIZE fail (EFBIG, said where they happen)
 * instead of SIGXFSZ killing the process mid-write with no word and a partial file; and
 * under RLIMIT_AS or RLIMIT_DATA, a program linked with jemalloc runs again with
 * MALLOC_CONF=narenas:1 (unless MALLOC_CONF is set): jemalloc 5.3 crashes (a NULL arena,
 * jemalloc issue 2289) when a new thread's arena cannot be mapped, where one arena
 * shared by the threads gives malloc's NULL, which ringflow reports. */
void rf_cli_limits(char **argv);
void rf_cli_check_stdout(const char *prog);

#endif
