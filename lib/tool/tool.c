/* tool.c: the manners every tq tool shares (CONVENTIONS.md): common options,
 * one-line errors with sysexits codes, terminal refusal, atomic text output,
 * progress only on a terminal. */
#include "tool.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

static tq_tool *the_tool; /* for the signal handler */
static int progress_shown;
static double progress_last;

static void on_signal(int sig)
{
    tq_tempfile_cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int parse_log_env(void)
{
    const char *e = getenv("TQ_LOG");
    if (!e || !*e)
        return TQ_LOG_WARN;
    if (!strcmp(e, "error"))
        return TQ_LOG_ERROR;
    if (!strcmp(e, "info"))
        return TQ_LOG_INFO;
    if (!strcmp(e, "debug"))
        return TQ_LOG_DEBUG;
    return TQ_LOG_WARN;
}

void tq_tool_init(tq_tool *t, const char *name)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->log_level = parse_log_env();
    t->progress = -1; /* auto */
    the_tool = t;
    /* A closed pipe downstream shows up as EPIPE from write, handled quietly. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static long long parse_int(tq_tool *t, const char *opt, const char *arg, long long lo,
                           long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi)
        tq_tool_usage(t, "%s wants an integer in %lld..%lld, not '%s'", opt, lo, hi, arg);
    return v;
}

int tq_tool_option(tq_tool *t, int opt, const char *arg, void (*help)(void))
{
    switch (opt) {
    case 'o':
        t->output = arg;
        return 1;
    case 'f':
        t->force = 1;
        return 1;
    case 'q':
        t->log_level = TQ_LOG_ERROR;
        return 1;
    case 'v':
        t->log_level = t->log_level < TQ_LOG_INFO ? TQ_LOG_INFO : TQ_LOG_DEBUG;
        return 1;
    case 'h':
        help();
        exit(fflush(stdout) ? 74 : 0);
    case 'V':
        printf("%s %s\n", t->name, TQ_VERSION);
        exit(fflush(stdout) ? 74 : 0);
    case TQ_OPT_DEVICE:
        t->device = arg;
        return 1;
    case TQ_OPT_LIST_DEVICES:
        t->list_devices = 1;
        return 1;
    case TQ_OPT_THREADS:
        t->threads = (int)parse_int(t, "--threads", arg, 1, 1024);
        return 1;
    case TQ_OPT_SEED:
        t->seed = (uint64_t)parse_int(t, "--seed", arg, 0, INT64_MAX);
        t->seed_set = 1;
        return 1;
    case TQ_OPT_PROGRESS:
        if (!strcmp(arg, "auto"))
            t->progress = -1;
        else if (!strcmp(arg, "always"))
            t->progress = 1;
        else if (!strcmp(arg, "never"))
            t->progress = 0;
        else
            tq_tool_usage(t, "--progress wants auto, always or never, not '%s'", arg);
        return 1;
    case '?':
    case ':':
        /* tq_tool_getopt names the option; a bare getopt_long loop cannot */
        tq_tool_usage(t, "unknown or incomplete option");
    }
    return 0;
}

/* The long option ARG ("--name" or "--name=value") means: its full name when
 * it is an abbreviation of exactly one with code val (any code: val < 0). */
static const char *long_name(const struct option *lo, const char *arg, int val, int has_arg)
{
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    const char *found = NULL;
    for (; lo && lo->name; lo++) {
        if (strncmp(lo->name, name, len) || (val >= 0 && lo->val != val) ||
            (has_arg >= 0 && lo->has_arg != has_arg))
            continue;
        if (strlen(lo->name) == len)
            return lo->name;
        found = found ? "" : lo->name;
    }
    return found && *found ? found : NULL;
}

int tq_tool_getopt(tq_tool *t, int argc, char **argv, const char *shortopts,
                   const struct option *longopts)
{
    /* ':' first: a missing argument comes back as ':', told apart from '?' */
    char opts[128];
    snprintf(opts, sizeof opts, ":%s", shortopts);
    opterr = 0;
    int c = getopt_long(argc, argv, opts, longopts, NULL);
    if (c != '?' && c != ':')
        return c;
    /* the element getopt just read: argv[optind - 1], except inside a cluster
     * of short options (-qz), where optind has not moved on yet */
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    int is_long = !strncmp(arg, "--", 2) && arg[2];
    if (c == ':' && is_long) {
        const char *name = long_name(longopts, arg, optopt, required_argument);
        tq_tool_usage(t, "option '--%s' requires an argument", name ? name : arg + 2);
    }
    if (c == ':')
        tq_tool_usage(t, "option requires an argument -- '%c'", optopt);
    if (optopt && is_long && strchr(arg, '=')) {
        const char *name = long_name(longopts, arg, optopt, no_argument);
        if (name)
            tq_tool_usage(t, "option '--%s' doesn't allow an argument", name);
    }
    if (optopt)
        tq_tool_usage(t, "invalid option -- '%c'", optopt);
    /* optopt 0: a long option none has, or the abbreviation of several */
    size_t len = strcspn(arg + 2, "=");
    char all[512] = "";
    size_t at = 0;
    int n = 0;
    for (const struct option *lo = longopts; lo && lo->name; lo++)
        if (!strncmp(lo->name, arg + 2, len) && at < sizeof all) {
            at += (size_t)snprintf(all + at, sizeof all - at, " '--%s'", lo->name);
            n++;
        }
    if (n > 1)
        tq_tool_usage(t, "option '%.*s' is ambiguous; possibilities:%s", (int)len + 2, arg, all);
    tq_tool_usage(t, "unrecognized option '%s'", arg);
}

void tq_tool_ready(tq_tool *t)
{
    if (t->threads)
        tq_threads_set(t->threads);
    /* A device the user named must exist, whatever the tool (CONVENTIONS.md). */
    tq_status st = tq_device_check(t->device);
    if (st == TQ_ERR_USAGE)
        tq_tool_usage(t, "%s", tq_errmsg());
    if (st)
        tq_tool_fail(t, st);
    if (t->progress < 0)
        t->progress = isatty(2) && t->log_level > TQ_LOG_ERROR;
    if (t->log_level == TQ_LOG_ERROR)
        t->progress = 0;
    if (t->list_devices) {
        char *report;
        st = tq_device_list(&report);
        if (st)
            tq_tool_fail(t, st);
        fputs(report, stdout);
        free(report);
        exit(fflush(stdout) ? 74 : 0);
    }
}

void tq_tool_fail(tq_tool *t, tq_status st)
{
    tq_tool_progress_done(t);
    tq_tempfile_cleanup_all(); /* a spool or a half-written output */
    if (st == TQ_ERR_PIPE)
        exit(0);
    fprintf(stderr, "%s: error: %s\n", t->name, tq_errmsg()[0] ? tq_errmsg() : "failed");
    exit(tq_status_exit_code(st));
}

void tq_tool_usage(tq_tool *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", t->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see '%s --help'\n", t->name);
    va_end(ap);
    exit(2);
}

void tq_tool_log(tq_tool *t, int level, const char *fmt, ...)
{
    if (level > t->log_level)
        return;
    tq_tool_progress_done(t);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", t->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void tq_tool_check_output(tq_tool *t, const char *path)
{
    tq_status st = tq_tool_output_creatable(path);
    if (st)
        tq_tool_fail(t, st);
}

tq_status tq_tool_output_creatable(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return TQ_OK;
    struct stat sb;
    tq_status st = TQ_OK;
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
        st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", path, strerror(EISDIR));
    else if (stat(path, &sb) || S_ISREG(sb.st_mode)) {
        int fd;
        char *tmp;
        st = tq_atomic_open(path, &fd, &tmp);
        if (!st) {
            close(fd);
            st = tq_atomic_finish(tmp, path, 0, TQ_OK);
        }
    }
    return st;
}

tq_status tq_tool_open_output(tq_tool *t, tq_writer **w)
{
    if (!t->output || !strcmp(t->output, "-")) {
        if (isatty(1) && !t->force)
            return tq_fail(TQ_ERR_USAGE,
                           "refusing to write a binary stream to a terminal; pipe it or use "
                           "-o, or tq-cat to view it");
        return tq_writer_open_fd(w, 1, "stdout");
    }
    return tq_writer_open_path(w, t->output);
}

tq_status tq_tool_open_text(tq_tool *t, FILE **out, char **tmp_path)
{
    *tmp_path = NULL;
    if (!t->output || !strcmp(t->output, "-")) {
        *out = stdout;
        return TQ_OK;
    }
    int fd;
    char *tmp;
    tq_status st = tq_atomic_open(t->output, &fd, &tmp);
    if (st)
        return st;
    *out = fdopen(fd, "w");
    if (!*out) {
        close(fd);
        return tq_atomic_finish(tmp, t->output, 0, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    }
    *tmp_path = tmp;
    return TQ_OK;
}

tq_status tq_tool_close_text(tq_tool *t, FILE *out, char *tmp, int commit)
{
    tq_status st = TQ_OK;
    if (fflush(out) || ferror(out)) {
        if (errno == EPIPE)
            st = tq_fail(TQ_ERR_PIPE, "reader went away");
        else
            st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", out != stdout ? t->output : "stdout",
                         strerror(errno));
    }
    if (out == stdout)
        return st;
    if (fclose(out) && !st)
        st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", t->output, strerror(errno));
    return tq_atomic_finish(tmp, t->output, commit, st);
}

void tq_tool_pick(tq_tool *t, tq_reader *r, const char *path, const char *label, tq_pick *p)
{
    tq_status st = r ? tq_pick_frame(r, p) : tq_pick_path(path, label, p);
    if (st)
        tq_tool_fail(t, st);
    if (p->name[0])
        tq_tool_log(t, TQ_LOG_INFO, "%s: frame \"%s\" (%s)", p->what, p->name, p->why);
    else
        tq_tool_log(t, TQ_LOG_INFO, "%s: no frame fits (%s)", p->what, p->why);
}

void tq_tool_took(tq_tool *t, const tq_took *took, int n)
{
    char line[1024], one[400];
    size_t len = 0;
    line[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!took[i].rank)
            continue;
        tq_took_say(&took[i], one, sizeof one);
        if (len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", len ? "; " : "", one);
    }
    if (line[0])
        tq_tool_log(t, TQ_LOG_INFO, "%s", line);
}

tq_status tq_tool_frame_names(tq_reader *r, char *buf, size_t n, size_t *count)
{
    size_t len = 0;
    buf[0] = 0;
    *count = 0;
    tq_status st = tq_reader_lookahead(r, count);
    if (st)
        return st;
    for (size_t i = 0; i < *count; i++) {
        const tq_frame *f = tq_reader_ahead(r, i);
        if (!f || len + strlen(f->name) + 8 >= n) {
            if (len + 6 < n)
                snprintf(buf + len, n - len, "%s...", len ? ", " : "");
            break;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", len ? ", " : "", f->name);
    }
    return TQ_OK;
}

void tq_tool_tempfile(const char *path, int add)
{
    if (add)
        tq_tempfile_add(path);
    else
        tq_tempfile_remove(path);
}

double tq_tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tq_tool_progress(tq_tool *t, const char *fmt, ...)
{
    if (t->progress <= 0)
        return;
    double now = tq_tool_now();
    if (now - progress_last < 0.25)
        return;
    progress_last = now;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r\033[K%s: ", t->name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    progress_shown = 1;
}

void tq_tool_progress_done(tq_tool *t)
{
    (void)t;
    if (progress_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        progress_shown = 0;
    }
}

void tq_tool_device_done(tq_tool *t, const tq_device *dev)
{
    if (!dev)
        return;
    if (tq_device_host_ops(dev)[0])
        tq_tool_log(t, TQ_LOG_INFO, "%s: ran on the host (no kernel on this device): %s",
                    tq_device_name(dev), tq_device_host_ops(dev));
    long graphs, replays;
    tq_device_graph_counts(dev, &graphs, &replays);
    if (graphs)
        tq_tool_log(t, TQ_LOG_INFO, "%s: %ld graph%s recorded, %ld launch%s", tq_device_name(dev),
                    graphs, graphs == 1 ? "" : "s", replays, replays == 1 ? "" : "es");
}

int64_t tq_tool_int_arg(tq_tool *t, const char *opt, const char *arg, int64_t lo, int64_t hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi)
        tq_tool_usage(t, "%s wants a number %lld..%lld, not '%s'", opt, (long long)lo,
                      (long long)hi, arg);
    return v;
}
