/*
 * run.h - running a test program the way a user would, and reading what
 * it left behind (prefix run_).
 *
 * Tests start programs as child processes with a chosen environment -
 * with or without LD_PRELOAD=librecap.so, with the stand-in driver's knobs
 * - capture stdout and stderr into files, and then compare outputs, count
 * log lines and read the stand-in's call counts. Must never: leave a child
 * running past its timeout, or depend on the test's own environment beyond
 * the paths the build passes in (RECAP_LIB, STANDIN_DIR, ...). With
 * RUN_EMULATOR set (a cross build), programs run under that emulator.
 */
#ifndef TEST_RUN_H
#define TEST_RUN_H

#include <stddef.h>

#define RUN_MAX_ENV 48

struct run_result {
    int status;          /* exit status, or 128 + signal, or -1 on timeout */
    char *out;           /* stdout, NUL-terminated, owned */
    char *err;           /* stderr, NUL-terminated, owned */
    size_t out_len, err_len;
};

struct run_spec {
    const char *argv[16];            /* argv[0] is the program path */
    const char *env[RUN_MAX_ENV];    /* "NAME=value" added to/overriding the test's env */
    int with_recap;                  /* preload librecap.so (and a sanitizer runtime if built so);
                                        with RECAP_SELF_RECORD=off unless env names it: each
                                        suite tests executable reuse and, in its -self-record
                                        variant, self-recording (recap's default) apart */
    int timeout_s;                   /* 0: 120 s */
};

/* The characters at which the dynamic loader splits LD_PRELOAD. */
#define RUN_PRELOAD_SEPARATORS " :\t\n"

/* A path naming the library at `path` that LD_PRELOAD can carry: the path
 * itself, or, if it holds a separator, a link to it in a private directory
 * made for this process (removed at its exit). */
const char *run_preloadable(const char *path);

/* Runs the program and waits. Returns 0 if it ran (whatever its status). */
int run_program(const struct run_spec *spec, struct run_result *res);
void run_result_free(struct run_result *res);

/* Adds "NAME=value" to spec->env (formatted). */
void run_setenv(struct run_spec *spec, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Passes the test's own NAME on to the program (run.c keeps SCENARIO_*,
 * STANDIN_* and RECAP_* from children unless named): a suite-wide knob
 * meson sets for every case. Nothing when unset or empty. */
void run_forward_env(struct run_spec *spec, const char *name);

/* Whether the test's own environment has NAME=value. */
int run_env_is(const char *name, const char *value);

/* A fresh temporary directory for one test (removed by run_cleanup_dir). */
char *run_temp_dir(void);
void run_cleanup_dir(char *dir);

/* The paths of what a pair of runs (without recap and under it) leaves:
 * a fresh temporary directory in *dir (removed by run_cleanup_dir) and in
 * it recap's log and the scenario stats of each run, written into
 * buffers of RUN_PATH_MAX bytes. */
#define RUN_PATH_MAX 4200
void run_pair_paths(char **dir, char *log, char *stats, char *base_stats);

/* A path inside a directory (static buffer ring, enough for a test). */
const char *run_path(const char *dir, const char *name);

/* The whole file, NUL-terminated, or NULL. */
char *run_read_file(const char *path, size_t *len);

/* Lines of a file containing every one of the NULL-terminated needles. */
int run_count_lines(const char *path, ...);

/* A counter of the "totals" object of the last "end" event in a recap log
 * (the exact numbers: routine events are sampled), or -1. */
long run_log_total(const char *log, const char *key);

/* A figure of the "step" object in the "totals" of the last "end" event
 * (where the step time went, shim/base/step_time.h), or -1 if it has none. */
double run_log_step(const char *log, const char *key);

/* The number after "NAME " in a stats file written by a scenario. */
long run_stat(const char *path, const char *name);

/* Paths the build passes in the environment; abort the test if missing. */
const char *run_env_path(const char *name);

#endif
