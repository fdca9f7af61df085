/*
 * lifecycle.c - programs that do what a long-lived process may do around
 * recap: `lifecycle fork` captures, forks, and captures in both processes;
 * `lifecycle dlclose` opens the driver with dlopen, uses it and closes it;
 * `lifecycle noinit` reaches the driver without ever calling cuInit;
 * `lifecycle exit-thread` ends the process with exit() from another thread;
 * `lifecycle killed` captures until it kills itself with SIGKILL.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../scenario/scenario.h"

static void loop(struct sc_context *c, const char *who, int iters)
{
    struct sc_recipe r;
    struct sc_options o = { .mode = CU_STREAM_CAPTURE_MODE_GLOBAL };
    CUgraph pending = NULL;
    for (int it = 0; it < iters; it++) {
        r.n = 0;
        sc_add(&r, SC_AXPY, 1.0f + (float)it, 0, 1, 0);
        sc_add(&r, SC_SCALE, 0.5f, 2, 0, 0);
        printf("%s ", who);
        sc_iteration(c, it, &r, &o, &pending);
        fflush(stdout);
    }
}

static void *exit_from_thread(void *arg)
{
    (void)arg;
    printf("exiting from a second thread\n");
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "fork";
    if (!strcmp(what, "exit-thread") || !strcmp(what, "killed")) {
        struct sc_context c;
        sc_setup(&c);
        loop(&c, "before", 70);
        if (!strcmp(what, "killed"))
            raise(SIGKILL);
        pthread_t t;
        pthread_create(&t, NULL, exit_from_thread, NULL);
        pthread_join(t, NULL);
        return 1;                     /* not reached: the thread exits */
    }
    if (!strcmp(what, "noinit")) {
        int version = 0;
        void *p = NULL;
        CUresult r = cuDriverGetVersion(&version);
        CUresult q = cuGetProcAddress_v2("cuGraphLaunch", &p, 12000, 0, NULL);
        printf("noinit version-rc=%d proc-rc=%d found=%d\n", (int)r, (int)q, p != NULL);
        return 0;
    }
    if (!strcmp(what, "dlclose")) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        CUresult (*get_version)(int *) = (CUresult (*)(int *))dlsym(h, "cuDriverGetVersion");
        int version = 0;
        CUresult r = get_version(&version);
        int closed = dlclose(h);
        struct sc_context c;
        sc_setup(&c);
        loop(&c, "after-dlclose", 3);
        printf("dlclose version-rc=%d closed=%d\n", (int)r, closed);
        return 0;
    }
    struct sc_context c;
    sc_setup(&c);
    loop(&c, "parent-before", 3);
    pid_t pid = fork();
    if (pid == 0) {
        /* A real driver refuses a forked child's CUDA calls; the stand-in
         * does not, which lets the child prove that recap starts it with
         * empty caches and a log of its own. */
        loop(&c, "child", 3);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    loop(&c, "parent-after", 3);
    printf("child status=%d\n", WEXITSTATUS(status));
    return 0;
}
