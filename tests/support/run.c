/*
 * run.c - start a program with a chosen environment and collect its output.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

const char *run_env_path(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "test: %s is not set (run the tests through meson test)\n", name);
        abort();
    }
    return v;
}

/* Environment entries live in a static pool: a test process is short-lived,
 * and leak checkers in the sanitizer build must not see test scaffolding. */
static char env_pool[1 << 20];
static size_t env_pool_used;

void run_setenv(struct run_spec *spec, const char *name, const char *fmt, ...)
{
    char value[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    size_t len = strlen(name) + 1 + strlen(value) + 1;
    if (env_pool_used + len > sizeof env_pool) {
        fprintf(stderr, "test: environment pool exhausted\n");
        abort();
    }
    char *entry = env_pool + env_pool_used;
    env_pool_used += len;
    snprintf(entry, len, "%s=%s", name, value);
    for (int i = 0; i < RUN_MAX_ENV - 1; i++) {
        if (!spec->env[i]) {
            spec->env[i] = entry;
            return;
        }
    }
}

void run_forward_env(struct run_spec *spec, const char *name)
{
    const char *v = getenv(name);
    if (v && *v)
        run_setenv(spec, name, "%s", v);
}

int run_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

/* The private directory of this process's preload links, removed at its
 * exit (not at a forked child's: the links outlive the test's children). */
static char preload_dir[64];
static pid_t preload_dir_owner;

static void preload_dir_remove(void)
{
    if (preload_dir[0] && getpid() == preload_dir_owner) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", preload_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "test: could not remove %s\n", preload_dir);
    }
}

const char *run_preloadable(const char *path)
{
    static struct { char path[PATH_MAX]; char link[128]; } made[8];
    static int nmade;
    if (!strpbrk(path, RUN_PRELOAD_SEPARATORS))
        return path;
    for (int i = 0; i < nmade; i++)
        if (!strcmp(made[i].path, path))
            return made[i].link;
    if (nmade == (int)(sizeof made / sizeof made[0])) {
        fprintf(stderr, "test: more than %d libraries to preload from odd paths\n", nmade);
        abort();
    }
    if (!preload_dir[0] || preload_dir_owner != getpid()) {
        /* mkdtemp: a new directory only this user can write, under /tmp
         * (TMPDIR may itself hold a space). */
        snprintf(preload_dir, sizeof preload_dir, "/tmp/recap-preload-XXXXXX");
        if (!mkdtemp(preload_dir)) {
            perror("test: mkdtemp for preload links");
            abort();
        }
        if (preload_dir_owner == 0)
            atexit(preload_dir_remove);
        preload_dir_owner = getpid();
    }
    char target[PATH_MAX];
    if (!realpath(path, target)) {
        fprintf(stderr, "test: cannot preload %s: %s\n", path, strerror(errno));
        abort();
    }
    snprintf(made[nmade].link, sizeof made[nmade].link, "%s/%d.so", preload_dir, nmade);
    if (symlink(target, made[nmade].link) != 0) {
        fprintf(stderr, "test: symlink %s: %s\n", made[nmade].link, strerror(errno));
        abort();
    }
    snprintf(made[nmade].path, sizeof made[nmade].path, "%s", path);
    return made[nmade++].link;
}

/* The environment of the child: the test's own, minus anything recap or
 * the stand-in would read, plus the spec's entries. */
static char **child_env(const struct run_spec *spec)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + RUN_MAX_ENV + 4, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "RECAP_", 6) || !strncmp(environ[i], "STANDIN_", 8) ||
            !strncmp(environ[i], "LD_PRELOAD=", 11) || !strncmp(environ[i], "SCENARIO_", 9))
            continue;
        env[k++] = environ[i];
    }
    if (spec->with_recap) {
        static char preload[8192];
        const char *prefix = getenv("RECAP_TEST_PRELOAD_PREFIX");
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s",
                 prefix && *prefix ? run_preloadable(prefix) : "", prefix && *prefix ? ":" : "",
                 run_preloadable(run_env_path("RECAP_LIB")));
        env[k++] = preload;
        env[k++] = "RECAP_SELF_RECORD=off";     /* replaced below if the spec names it */
    }
    for (int i = 0; spec->env[i]; i++) {
        size_t name_len = strcspn(spec->env[i], "=");
        for (size_t j = 0; j < k; j++) {
            if (!strncmp(env[j], spec->env[i], name_len + 1)) {
                env[j] = env[--k];
                break;
            }
        }
        env[k++] = (char *)spec->env[i];
    }
    env[k] = NULL;
    return env;
}

char *run_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* Programs of another architecture run under user-mode emulation
 * (RUN_EMULATOR, e.g. qemu-aarch64, with RUN_EMULATOR_SYSROOT as its -L).
 * The dynamic loader's variables go to the emulated program through -E:
 * set for the emulator itself, the host's loader would act on them. */
static void exec_emulated(const char *emulator, const struct run_spec *spec, char **env)
{
    const char *argv[16 + 2 * RUN_MAX_ENV + 8];
    int n = 0, k = 0;
    argv[n++] = emulator;
    const char *sysroot = getenv("RUN_EMULATOR_SYSROOT");
    if (sysroot && *sysroot) {
        argv[n++] = "-L";
        argv[n++] = sysroot;
    }
    for (int i = 0; env[i]; i++) {
        if (!strncmp(env[i], "LD_", 3)) {
            argv[n++] = "-E";
            argv[n++] = env[i];
        } else {
            env[k++] = env[i];
        }
    }
    env[k] = NULL;
    for (int i = 0; spec->argv[i]; i++)
        argv[n++] = spec->argv[i];
    argv[n] = NULL;
    execvpe(emulator, (char *const *)argv, env);
    fprintf(stderr, "exec %s: %s\n", emulator, strerror(errno));
    _exit(127);
}

int run_program(const struct run_spec *spec, struct run_result *res)
{
    char *dir = run_temp_dir();
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    char **env = child_env(spec);

    memset(res, 0, sizeof *res);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, 1);
        dup2(err, 2);
        setpgid(0, 0);
        const char *emulator = getenv("RUN_EMULATOR");
        if (emulator && *emulator)
            exec_emulated(emulator, spec, env);
        execve(spec->argv[0], (char *const *)spec->argv, env);
        fprintf(stderr, "exec %s: %s\n", spec->argv[0], strerror(errno));
        _exit(127);
    }
    int timeout = spec->timeout_s ? spec->timeout_s : 120;
    time_t deadline = time(NULL) + timeout;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (time(NULL) > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            res->status = -1;
            goto collect;
        }
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
collect:
    free(env);
    res->out = run_read_file(out_path, &res->out_len);
    res->err = run_read_file(err_path, &res->err_len);
    if (!res->out)
        res->out = strdup("");
    if (!res->err)
        res->err = strdup("");
    run_cleanup_dir(dir);
    return 0;
}

void run_result_free(struct run_result *res)
{
    free(res->out);
    free(res->err);
    memset(res, 0, sizeof *res);
}

char *run_temp_dir(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *dir = malloc(strlen(base) + 32);
    sprintf(dir, "%s/recap-test-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    return dir;
}

void run_pair_paths(char **dir, char *log, char *stats, char *base_stats)
{
    *dir = run_temp_dir();
    snprintf(log, RUN_PATH_MAX, "%s", run_path(*dir, "recap.jsonl"));
    snprintf(stats, RUN_PATH_MAX, "%s", run_path(*dir, "recap.stats"));
    snprintf(base_stats, RUN_PATH_MAX, "%s", run_path(*dir, "base.stats"));
}

void run_cleanup_dir(char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test: could not remove %s\n", dir);
    free(dir);
}

const char *run_path(const char *dir, const char *name)
{
    static char ring[16][4200];
    static int next;
    char *p = ring[next++ % 16];
    snprintf(p, sizeof ring[0], "%s/%s", dir, name);
    return p;
}

int run_count_lines(const char *path, ...)
{
    char *text = run_read_file(path, NULL);
    if (!text)
        return -1;
    const char *needles[16];
    int nneedles = 0;
    va_list ap;
    va_start(ap, path);
    for (const char *n; (n = va_arg(ap, const char *)) && nneedles < 16;)
        needles[nneedles++] = n;
    va_end(ap);

    int count = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int all = 1;
        for (int i = 0; i < nneedles && all; i++)
            all = strstr(line, needles[i]) != NULL;
        count += all;
    }
    free(text);
    return count;
}

/* The value after `"key":` in the last end event's totals (inside its
 * `"step":{...}` object where `step`), or NULL. */
static const char *last_totals_value(const char *text, const char *key, int step)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *end = NULL;
    for (const char *p = text; (p = strstr(p, "\"event\":\"end\"")); p++)
        end = p;
    const char *from = end ? strstr(end, "\"totals\":{") : NULL;
    if (from && step)
        from = strstr(from, "\"step\":{");
    const char *at = from ? strstr(from, needle) : NULL;
    if (at && step && at > strchr(from, '}'))
        at = NULL;
    return at ? at + strlen(needle) : NULL;
}

long run_log_total(const char *log, const char *key)
{
    char *text = run_read_file(log, NULL);
    if (!text)
        return -1;
    const char *at = last_totals_value(text, key, 0);
    long value = at ? atol(at) : -1;
    free(text);
    return value;
}

double run_log_step(const char *log, const char *key)
{
    char *text = run_read_file(log, NULL);
    if (!text)
        return -1;
    const char *at = last_totals_value(text, key, 1);
    double value = at ? atof(at) : -1;
    free(text);
    return value;
}

long run_stat(const char *path, const char *name)
{
    char *text = run_read_file(path, NULL);
    if (!text)
        return -1;
    long value = -1;
    size_t len = strlen(name);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, name, len) && line[len] == ' ') {
            value = atol(line + len + 1);
            break;
        }
    }
    free(text);
    return value;
}
