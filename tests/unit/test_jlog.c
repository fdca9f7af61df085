/*
 * test_jlog.c - the log writer: exact JSON escaping, valid JSON whatever
 * the strings hold or however long the line gets, safe file creation
 * (symlinks, FIFOs, directories, devices, missing directories, foreign
 * owners, narrow modes, append-only), /dev/null as a quiet "off", complete lines under concurrency,
 * one warning per failure, and fork children writing their own file.
 *
 * JSONL_CHECK names tests/unit/jsonl_check.py (set by meson); each test
 * runs in its own process (Criterion), so the writer's state is fresh.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim/base/jlog.h"

static char tmpdir[64];
static char *no_env[] = { NULL };

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/recap-jlog-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", tmpdir);
}

TestSuite(jlog, .init = make_tmpdir, .fini = remove_tmpdir);

static void in_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

/* Runs the JSON Lines checker on path (lines < 0: any count). */
static int check_jsonl(const char *path, long lines)
{
    const char *checker = getenv("JSONL_CHECK");
    cr_assert_not_null(checker, "JSONL_CHECK not set (run through meson test)");
    char cmd[PATH_MAX * 2];
    if (lines >= 0)
        snprintf(cmd, sizeof cmd, "python3 '%s' '%s' %ld", checker, path, lines);
    else
        snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", checker, path);
    return system(cmd);
}

static size_t slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}

/* ---- stderr capture ------------------------------------------------------ */

static int saved_stderr = -1, captured_stderr = -1;

static void capture_stderr(void)
{
    captured_stderr = memfd_create("stderr", 0);
    saved_stderr = dup(2);
    dup2(captured_stderr, 2);
}

static const char *captured(void)
{
    static char text[8192];
    lseek(captured_stderr, 0, SEEK_SET);
    ssize_t n = read(captured_stderr, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static void restore_stderr(void)
{
    dup2(saved_stderr, 2);
    close(saved_stderr);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void emit_simple(const char *event)
{
    struct jlog_line l;
    jlog_line_begin(&l, event);
    jlog_u64(&l, "n", 1);
    jlog_line_emit(&l);
}

/* ---- building lines --------------------------------------------------------- */

static void body_is(const struct jlog_line *l, const char *want_after_pid)
{
    char head[64];
    snprintf(head, sizeof head, "{\"event\":\"t\",\"pid\":%d", (int)getpid());
    size_t hl = strlen(head);
    cr_assert_geq(l->len, hl);
    cr_assert_eq(memcmp(l->buf, head, hl), 0, "%.*s", (int)l->len, l->buf);
    cr_expect_eq(l->len - hl, strlen(want_after_pid), "got %.*s", (int)(l->len - hl), l->buf + hl);
    cr_expect_eq(memcmp(l->buf + hl, want_after_pid, l->len - hl), 0, "got  %.*s\nwant %s",
                 (int)(l->len - hl), l->buf + hl, want_after_pid);
}

Test(jlog, escaping_is_exact)
{
    struct jlog_line l;
    jlog_line_begin(&l, "t");
    jlog_str(&l, "s", "a\"b\\c/\n\r\t\b\f\x01\x1f\x7f");
    jlog_str(&l, "u", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");          /* é € 😀 kept */
    jlog_str(&l, "bad", "\xff" "x\xc3" "\xed\xa0\x80" "\xc0\xaf" "\xf4\x90\x80\x80");
    jlog_str(&l, "k\"ey", NULL);
    jlog_str(&l, "e", "");
    body_is(&l, ",\"s\":\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\""
                ",\"u\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""
                ",\"bad\":\"\\ufffdx\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                "\\ufffd\\ufffd\""
                ",\"k\\\"ey\":null,\"e\":\"\"");
}

Test(jlog, numbers_and_literals)
{
    struct jlog_line l;
    jlog_line_begin(&l, "t");
    jlog_u64(&l, "u", UINT64_MAX);
    jlog_u64(&l, "z", 0);
    jlog_i64(&l, "i", INT64_MIN);
    jlog_i64(&l, "j", -42);
    jlog_f64(&l, "f", 1.5);
    jlog_f64(&l, "g", 0.1);
    jlog_f64(&l, "nan", NAN);
    jlog_f64(&l, "inf", -INFINITY);
    jlog_f64(&l, "big", 1e300);
    jlog_bool(&l, "t", 1);
    jlog_bool(&l, "f2", 0);
    jlog_site(&l, "site", 0x00ab00cd00ef0012ull);
    body_is(&l, ",\"u\":18446744073709551615,\"z\":0,\"i\":-9223372036854775808,\"j\":-42"
                ",\"f\":1.5,\"g\":0.1,\"nan\":null,\"inf\":null,\"big\":1e+300"
                ",\"t\":true,\"f2\":false,\"site\":\"00ab00cd00ef0012\"");
}

Test(jlog, decimal_point_ignores_locale)
{
    const char *got = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!got) {
        /* Not installed: compile it into the test's folder, if the
         * machine has the locale sources. */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null 2>&1",
                 tmpdir);
        if (system(cmd) == 0) {
            setenv("LOCPATH", tmpdir, 1);
            got = setlocale(LC_NUMERIC, "de_DE.UTF-8");
        }
    }
    if (!got)
        cr_skip_test("no locale with a decimal comma available");
    char probe[16];
    snprintf(probe, sizeof probe, "%.2f", 2.25);
    cr_assert_str_eq(probe, "2,25", "the locale does not use a decimal comma");
    struct jlog_line l;
    jlog_line_begin(&l, "t");
    jlog_f64(&l, "f", 2.25);
    jlog_f64(&l, "g", -1.5e-7);
    body_is(&l, ",\"f\":2.25,\"g\":-1.5e-07");
}

Test(jlog, arrays_objects_and_stray_keys)
{
    struct jlog_line l;
    jlog_line_begin(&l, "t");
    jlog_array_begin(&l, "frames");
    jlog_str(&l, NULL, "a+0x1");
    jlog_str(&l, "ignored-in-array", "b+0x2");
    jlog_object_begin(&l, NULL);
    jlog_u64(&l, "n", 1);
    jlog_u64(&l, NULL, 2);   /* a key-less member of an object gets "" */
    jlog_object_end(&l);
    jlog_array_end(&l);
    jlog_object_begin(&l, "totals");
    jlog_object_end(&l);
    jlog_array_end(&l);      /* unbalanced end: ignored */
    jlog_bool(&l, "after", 1);
    body_is(&l, ",\"frames\":[\"a+0x1\",\"b+0x2\",{\"n\":1,\"\":2}],\"totals\":{}"
                ",\"after\":true");
}

static void emit_to(const char *path, void (*fill)(struct jlog_line *), char *line_out,
                    size_t len)
{
    jlog_configure(path, no_env);
    struct jlog_line *l = malloc(sizeof *l);
    fill(l);
    jlog_line_emit(l);
    free(l);
    slurp(path, line_out, len);
}

static void fill_long_string(struct jlog_line *l)
{
    static char s[40000];
    for (size_t i = 0; i + 3 < sizeof s; i += 3)
        memcpy(s + i, "\xe2\x82\xac", 3);    /* € everywhere: cuts must respect it */
    s[sizeof s - 1 - (sizeof s - 1) % 3] = '\0';
    jlog_line_begin(l, "t");
    jlog_str(l, "before", "x");
    jlog_str(l, "long", s);
    jlog_u64(l, "after", 1);
}

Test(jlog, overlong_string_is_cut_and_marked)
{
    char path[128];
    in_dir(path, sizeof path, "long.jsonl");
    static char text[JLOG_LINE_MAX * 2];
    emit_to(path, fill_long_string, text, sizeof text);
    size_t len = strlen(text);
    cr_expect_leq(len, JLOG_LINE_MAX);
    cr_expect_geq(len, JLOG_LINE_MAX - 64, "cut far too early: %zu", len);
    const char *tail = ",\"truncated\":true}\n";
    cr_expect_str_eq(text + len - strlen(tail), tail);
    cr_expect(strstr(text, "\"after\"") == NULL);
    cr_expect(strstr(text, "\"before\":\"x\"") != NULL);
    cr_expect_eq(check_jsonl(path, 1), 0);
}

static void fill_nested_overflow(struct jlog_line *l)
{
    jlog_line_begin(l, "t");
    jlog_array_begin(l, "sites");
    for (int i = 0; i < 4000; i++) {
        jlog_object_begin(l, NULL);
        jlog_site(l, "site", (uint64_t)i);
        jlog_array_begin(l, "v");
        jlog_u64(l, NULL, (uint64_t)i);
        jlog_array_end(l);
        jlog_object_end(l);
    }
    jlog_array_end(l);
    jlog_object_begin(l, "totals");
    jlog_u64(l, "captures", 1);
    jlog_object_end(l);
}

Test(jlog, overflow_inside_nested_containers_closes_them)
{
    char path[128];
    in_dir(path, sizeof path, "nested.jsonl");
    static char text[JLOG_LINE_MAX * 2];
    emit_to(path, fill_nested_overflow, text, sizeof text);
    cr_expect_leq(strlen(text), JLOG_LINE_MAX);
    cr_expect(strstr(text, "\"truncated\":true}\n") != NULL);
    cr_expect_eq(check_jsonl(path, 1), 0);
}

static void fill_too_deep(struct jlog_line *l)
{
    jlog_line_begin(l, "t");
    for (int i = 0; i < JLOG_MAX_NEST + 5; i++)
        jlog_array_begin(l, "a");
    jlog_u64(l, NULL, 1);
    for (int i = 0; i < JLOG_MAX_NEST + 5; i++)
        jlog_array_end(l);
}

Test(jlog, nesting_beyond_the_limit_is_truncation)
{
    char path[128];
    in_dir(path, sizeof path, "deep.jsonl");
    char text[4096];
    emit_to(path, fill_too_deep, text, sizeof text);
    cr_expect(strstr(text, "\"truncated\":true") != NULL, "%s", text);
    cr_expect_eq(check_jsonl(path, 1), 0);
}

Test(jlog, random_bytes_always_give_valid_json)
{
    char path[128];
    in_dir(path, sizeof path, "random.jsonl");
    jlog_configure(path, no_env);
    unsigned seed = 99;
    struct jlog_line *l = malloc(sizeof *l);
    char s[600];
    for (int i = 0; i < 3000; i++) {
        size_t n = (size_t)(rand_r(&seed) % (i % 100 == 0 ? 599 : 60));
        for (size_t k = 0; k < n; k++) {
            int r = rand_r(&seed);
            /* bias towards the interesting bytes */
            s[k] = (char)(r % 4 == 0 ? "\"\\\x01\x7f\xc3\xe2\xf0\x80\xbf\xff"[r / 4 % 10]
                                     : r % 256);
            if (s[k] == 0)
                s[k] = 1;
        }
        s[n] = '\0';
        jlog_line_begin(l, s);
        jlog_str(l, s, s);
        jlog_line_emit(l);
    }
    free(l);
    cr_expect_eq(check_jsonl(path, 3000), 0);
}

/* ---- files ------------------------------------------------------------------ */

static void expect_refused(const char *path, const char *reason)
{
    capture_stderr();
    jlog_configure(path, no_env);
    cr_expect(jlog_enabled());
    emit_simple("first");
    emit_simple("second");
    const char *err = captured();
    restore_stderr();
    char want[512];
    snprintf(want, sizeof want, "recap: cannot write log %s: %s; logging disabled\n", path,
             reason);
    cr_expect_str_eq(err, want);
    cr_expect_eq(count_lines(err), 1);
    cr_expect_not(jlog_enabled());
    cr_expect_str_eq(jlog_path(), "");
}

Test(jlog, planted_symlink_is_refused)
{
    char path[128], target[128], text[64];
    in_dir(path, sizeof path, "log.jsonl");
    in_dir(target, sizeof target, "victim");
    cr_assert_eq(symlink(target, path), 0);
    expect_refused(path, "it is a symbolic link, which recap does not follow");
    cr_expect_neq(access(target, F_OK), 0, "dangling symlink target was created");

    int fd = open(target, O_WRONLY | O_CREAT, 0600);
    cr_assert_eq(write(fd, "keep\n", 5), 5);
    close(fd);
    expect_refused(path, "it is a symbolic link, which recap does not follow");
    slurp(target, text, sizeof text);
    cr_expect_str_eq(text, "keep\n");
}

Test(jlog, directory_is_refused)
{
    expect_refused(tmpdir, "Is a directory");
}

Test(jlog, missing_directory_is_reported)
{
    char path[128];
    in_dir(path, sizeof path, "no/such/dir/log.jsonl");
    expect_refused(path, "No such file or directory");
}

Test(jlog, dev_full_is_refused)
{
    expect_refused("/dev/full", "not a regular file");
}

/* RECAP_LOG=/dev/null asks for no log: nothing on stderr, logging off
 * after the first event, as with "off" (another device stays refused). */
Test(jlog, dev_null_is_off_quietly)
{
    jlog_configure("/dev/null", no_env);
    capture_stderr();
    emit_simple("first");
    emit_simple("second");
    const char *err = captured();
    restore_stderr();
    cr_expect_str_eq(err, "");
    cr_expect_not(jlog_enabled());
    cr_expect_str_eq(jlog_path(), "");
}

Test(jlog, fifo_never_blocks)
{
    char path[128];
    in_dir(path, sizeof path, "fifo");
    cr_assert_eq(mkfifo(path, 0600), 0);
    alarm(10);                                  /* a hang fails the test */
    expect_refused(path, "not a regular file"); /* no reader */
    int reader = open(path, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(reader, 0);
    expect_refused(path, "not a regular file"); /* with a reader */
    char buf[16];
    cr_expect_leq(read(reader, buf, sizeof buf), 0, "something was written into the FIFO");
    close(reader);
    alarm(0);
}

Test(jlog, foreign_owner_is_refused)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to create a file owned by someone else");
    char path[128];
    in_dir(path, sizeof path, "theirs.jsonl");
    int fd = open(path, O_WRONLY | O_CREAT, 0666);
    close(fd);
    cr_assert_eq(chown(path, 65534, 65534), 0);
    expect_refused(path, "owned by another user");
    struct stat st;
    stat(path, &st);
    cr_expect_eq(st.st_size, 0);
}

Test(jlog, mode_is_at_most_0644)
{
    char path[128];
    struct stat st;
    in_dir(path, sizeof path, "wide.jsonl");
    umask(0);
    jlog_configure(path, no_env);
    emit_simple("x");
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0644, "mode %o", st.st_mode & 07777);
    in_dir(path, sizeof path, "narrow.jsonl");
    umask(077);
    jlog_configure(path, no_env);
    emit_simple("x");
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
}

Test(jlog, appends_never_truncates)
{
    char path[128], text[4096];
    in_dir(path, sizeof path, "old.jsonl");
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    const char *old = "{\"event\":\"old\",\"pid\":1}\n";
    cr_assert_eq(write(fd, old, strlen(old)), (ssize_t)strlen(old));
    close(fd);
    cr_expect_str_eq(jlog_path(), "");
    jlog_configure(path, no_env);
    cr_expect_str_eq(jlog_path(), "", "opened before the first event");
    emit_simple("new");
    cr_expect_str_eq(jlog_path(), path);
    jlog_configure(path, no_env);   /* a second writer, same path */
    emit_simple("newer");
    slurp(path, text, sizeof text);
    cr_expect_eq(strncmp(text, old, strlen(old)), 0, "%s", text);
    cr_expect(strstr(text, "\"event\":\"new\"") != NULL);
    cr_expect(strstr(text, "\"event\":\"newer\"") != NULL);
    cr_expect_eq(check_jsonl(path, 3), 0);
}

Test(jlog, off_writes_nothing)
{
    jlog_configure("off", no_env);
    cr_expect_not(jlog_enabled());
    capture_stderr();
    emit_simple("x");
    const char *err = captured();
    restore_stderr();
    cr_expect_str_eq(err, "");
    cr_expect_str_eq(jlog_path(), "");
}

Test(jlog, unconfigured_writes_nothing)
{
    cr_assert_eq(chdir(tmpdir), 0);
    cr_expect_not(jlog_enabled());
    capture_stderr();
    emit_simple("x");
    const char *err = captured();
    restore_stderr();
    cr_expect_str_eq(err, "");
    DIR *d = opendir(".");
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    cr_expect_eq(entries, 0, "a file was created");
}

Test(jlog, stderr_target)
{
    capture_stderr();
    jlog_configure("stderr", no_env);
    emit_simple("to-stderr");
    const char *err = captured();
    restore_stderr();
    char want[128];
    snprintf(want, sizeof want, "{\"event\":\"to-stderr\",\"pid\":%d,\"n\":1}\n", (int)getpid());
    cr_expect_str_eq(err, want);
    cr_expect_str_eq(jlog_path(), "stderr");
}

Test(jlog, template_expands_pid_and_rank)
{
    char tmpl[128], want[128];
    snprintf(tmpl, sizeof tmpl, "%s/r%%r-p%%p.jsonl", tmpdir);
    char *env[] = { "PMI_RANK=12", NULL };
    jlog_configure(tmpl, env);
    env[0] = "PMI_RANK=99";   /* the writer kept its own copy */
    emit_simple("x");
    snprintf(want, sizeof want, "%s/r12-p%d.jsonl", tmpdir, (int)getpid());
    cr_expect_str_eq(jlog_path(), want);
    cr_expect_eq(access(want, F_OK), 0);
}

Test(jlog, bad_template_is_one_message)
{
    char tmpl[128];
    snprintf(tmpl, sizeof tmpl, "%s/x%%q", tmpdir);
    capture_stderr();
    jlog_configure(tmpl, no_env);
    emit_simple("x");
    emit_simple("y");
    const char *err = captured();
    restore_stderr();
    cr_expect_eq(count_lines(err), 1, "%s", err);
    cr_expect(strstr(err, "found %q in the log path") != NULL, "%s", err);
    cr_expect(strstr(err, "; logging disabled\n") != NULL, "%s", err);
}

struct writer_arg {
    int id;
};

static void *writer(void *p)
{
    struct writer_arg *a = p;
    struct jlog_line *l = malloc(sizeof *l);
    char s[5000];
    unsigned seed = (unsigned)a->id;
    for (int i = 0; i < 400; i++) {
        size_t n = (size_t)(rand_r(&seed) % (i % 50 == 0 ? 4999 : 200));
        memset(s, 'a' + a->id, n);
        s[n] = '\0';
        jlog_line_begin(l, "w");
        jlog_i64(l, "thread", a->id);
        jlog_i64(l, "i", i);
        jlog_str(l, "pad", s);
        jlog_line_emit(l);
    }
    free(l);
    return NULL;
}

Test(jlog, concurrent_threads_write_whole_lines)
{
    char path[128];
    in_dir(path, sizeof path, "threads.jsonl");
    jlog_configure(path, no_env);   /* threads race for the first open too */
    enum { THREADS = 8 };
    pthread_t t[THREADS];
    struct writer_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i].id = i;
        pthread_create(&t[i], NULL, writer, &args[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(check_jsonl(path, THREADS * 400), 0);
}

Test(jlog, fork_child_writes_its_own_file)
{
    char tmpl[128], parent_path[128], child_path[128];
    static char text[8192];
    snprintf(tmpl, sizeof tmpl, "%s/log-%%p.jsonl", tmpdir);
    jlog_configure(tmpl, no_env);
    emit_simple("parent-1");
    snprintf(parent_path, sizeof parent_path, "%s", jlog_path());
    pid_t child = fork();
    if (child == 0) {
        jlog_after_fork_child();
        emit_simple("child");
        _exit(strcmp(jlog_path(), parent_path) == 0 ? 3 : 0);
    }
    int status;
    waitpid(child, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    emit_simple("parent-2");
    slurp(parent_path, text, sizeof text);
    cr_expect(strstr(text, "parent-1") && strstr(text, "parent-2"), "%s", text);
    cr_expect(strstr(text, "\"child\"") == NULL, "child wrote into the parent's log");
    snprintf(child_path, sizeof child_path, "%s/log-%d.jsonl", tmpdir, (int)child);
    slurp(child_path, text, sizeof text);
    char want[128];
    snprintf(want, sizeof want, "{\"event\":\"child\",\"pid\":%d,", (int)child);
    cr_expect_eq(strncmp(text, want, strlen(want)), 0, "child log: %s", text);
    cr_expect_eq(check_jsonl(parent_path, 2), 0);
    cr_expect_eq(check_jsonl(child_path, 1), 0);
}

Test(jlog, write_failure_is_one_message)
{
    char path[128];
    in_dir(path, sizeof path, "limited.jsonl");
    pid_t child = fork();
    if (child == 0) {
        /* A file size limit turns writes into EFBIG (SIGXFSZ ignored). It
         * limits memfds too, so stderr goes to a pipe here. */
        int fds[2];
        if (pipe(fds) != 0)
            _exit(2);
        dup2(fds[1], 2);
        struct rlimit lim = { 10, 10 };
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &lim);
        jlog_configure(path, no_env);
        emit_simple("x");
        emit_simple("y");
        close(2);
        close(fds[1]);
        char err[512];
        ssize_t n = read(fds[0], err, sizeof err - 1);
        err[n > 0 ? n : 0] = '\0';
        char want[256];
        snprintf(want, sizeof want, "recap: cannot write log %s: File too large; "
                 "logging disabled\n", path);
        if (strcmp(err, want) != 0)
            fprintf(stdout, "got: %s", err);
        _exit(strcmp(err, want) == 0 && !jlog_enabled() ? 0 : 1);
    }
    int status;
    waitpid(child, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
}

Test(jlog, descriptor_reused_by_the_program_is_left_alone)
{
    char path[128], other[128], text[256];
    in_dir(path, sizeof path, "mine.jsonl");
    in_dir(other, sizeof other, "theirs.txt");
    jlog_configure(path, no_env);
    emit_simple("x");
    /* find the log's descriptor the way a close-everything loop would */
    int logfd = -1;
    for (int fd = 3; fd < 1024 && logfd < 0; fd++) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strcmp(target, path) == 0)
                logfd = fd;
        }
    }
    cr_assert_geq(logfd, 3);
    close(logfd);
    int reused = open(other, O_WRONLY | O_CREAT, 0644);
    cr_assert_eq(reused, logfd, "descriptor number not reused; cannot test");
    capture_stderr();
    emit_simple("y");
    emit_simple("z");
    const char *err = captured();
    restore_stderr();
    cr_expect_eq(count_lines(err), 1, "%s", err);
    cr_expect(strstr(err, "closed or replaced the log's descriptor") != NULL, "%s", err);
    cr_expect_eq(slurp(other, text, sizeof text), 0, "log went into the program's file: %s",
                 text);
    close(reused);
}
