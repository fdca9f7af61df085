/*
 * test_capture_table.c - shim/state/capture_table.c alone: how a thread's memo
 * of its last stream lookup holds captures. A call into a capture borrows
 * the memo's reference instead of taking one of its own; while it does,
 * the thread's other lookups and the end of the capture leave the memo
 * alone, so the record outlives the call; the memo gives its reference
 * back once the call is done. And what a capture notes as it goes: its
 * reason, its change list, the streams it joins, and who may end it.
 * Each test runs in a process of its own, so the table starts empty.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shim/state/capture_table.h"

/* capture_table.c's only outside calls: no journal is ever written here. */
void journal_init(struct journal *j)
{
    memset(j, 0, sizeof *j);
}

void journal_free(struct journal *j)
{
    (void)j;
}

static int refs(const struct capture *cap)
{
    return __atomic_load_n(&cap->refs, __ATOMIC_RELAXED);
}

/* A registered capture on the stream `key`: the caller's and the table's
 * references. */
static struct capture *begun(const void *key)
{
    struct capture *cap = ctab_new();
    cr_assert_not_null(cap);
    cap->origin.key = key;
    cr_assert_eq(ctab_register(cap), 1);
    cr_assert_eq(refs(cap), 2);
    return cap;
}

/* One call into the capture on `key`, which must find `cap`; returns
 * whether the call borrowed the memo's reference. */
static int one_call(const void *key, struct capture *cap)
{
    int borrowed = -1;
    struct capture *found = ctab_find_stream_for_call(key, &borrowed);
    cr_assert_eq(found, cap);
    ctab_call_done(found, borrowed);
    return borrowed;
}

Test(capture_table, a_call_borrows_the_memo_instead_of_taking_a_reference)
{
    static char stream;
    struct capture *cap = begun(&stream);
    cr_assert_eq(one_call(&stream, cap), 0, "the first lookup fills the memo");
    cr_assert_eq(refs(cap), 3, "caller, table and memo");
    int borrowed = 0;
    struct capture *found = ctab_find_stream_for_call(&stream, &borrowed);
    cr_assert_eq(found, cap);
    cr_assert_eq(borrowed, 1);
    cr_assert_eq(refs(cap), 3, "a borrowing call takes no reference");
    ctab_call_done(found, borrowed);
    cr_assert_eq(refs(cap), 3, "nor gives one back");
}

Test(capture_table, a_lookup_inside_a_borrowing_call_leaves_the_memo_alone)
{
    static char stream_a, stream_b;
    struct capture *a = begun(&stream_a), *b = begun(&stream_b);
    one_call(&stream_a, a);
    int borrowed = 0;
    cr_assert_eq(ctab_find_stream_for_call(&stream_a, &borrowed), a);
    cr_assert_eq(borrowed, 1);
    struct capture *inner = ctab_find_stream(&stream_b);
    cr_assert_eq(inner, b);
    cr_assert_eq(refs(b), 3, "the caller's reference only: the memo still holds a");
    cr_assert_eq(refs(a), 3, "a keeps the memo's reference");
    int inner_borrowed = -1;
    struct capture *nested = ctab_find_stream_for_call(&stream_a, &inner_borrowed);
    cr_assert_eq(nested, a);
    cr_assert_eq(inner_borrowed, 0, "the memo is lent once at a time");
    ctab_call_done(nested, inner_borrowed);
    ctab_release(inner);
    ctab_call_done(a, borrowed);
    cr_assert_eq(refs(a), 3);
    cr_assert_eq(refs(b), 2);
    cr_assert_eq(one_call(&stream_a, a), 1, "the memo still answers for a");
}

Test(capture_table, a_capture_ended_during_a_borrowing_call_outlives_the_call)
{
    static char stream, other;
    struct capture *cap = begun(&stream);
    one_call(&stream, cap);
    int borrowed = 0;
    cr_assert_eq(ctab_find_stream_for_call(&stream, &borrowed), cap);
    cr_assert_eq(borrowed, 1);
    /* The capture ends meanwhile (as another thread may end it): the
     * table's and its creator's references go, and the end asks this
     * thread's memo to let go of it. */
    ctab_unregister(cap);
    ctab_release(cap);
    ctab_memo_forget(cap);
    cr_assert_null(ctab_find_stream(&other), "no capture is left in the table");
    cr_assert_eq(refs(cap), 1, "the lent memo keeps the record for the call");
    ctab_call_done(cap, borrowed);
    cr_assert_eq(refs(cap), 1, "until the memo itself is given back");
    ctab_memo_forget(cap);
    cr_assert_eq(ctab_new(), cap, "the last reference gone, the record serves the next capture");
}

Test(capture_table, a_changed_table_is_looked_up_again)
{
    static char stream, other;
    struct capture *cap = begun(&stream);
    one_call(&stream, cap);
    cr_assert_eq(one_call(&stream, cap), 1);
    begun(&other);   /* a registration changes what the table may answer */
    cr_assert_eq(one_call(&stream, cap), 0, "the memo is not trusted across a change");
    cr_assert_eq(one_call(&stream, cap), 1);
    cr_assert_eq(refs(cap), 3);
}

/* --- what a capture notes ------------------------------------------------------ */

Test(capture_table, a_reason_longer_than_its_room_is_cut_and_terminated)
{
    struct capture *cap = ctab_new();
    char longer[sizeof cap->reason + 40];
    memset(longer, 'r', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ctab_set_reason(cap, longer);
    cr_assert_eq(strlen(cap->reason), sizeof cap->reason - 1);
    ctab_set_reason(cap, "short");
    cr_assert_str_eq(cap->reason, "short");
    ctab_release(cap);
}

Test(capture_table, the_change_list_grows_and_is_forgotten_whole)
{
    struct capture *cap = ctab_new();
    for (int i = 0; i < 100; i++)
        ctab_push_change(cap, (struct changed_node){ (CUgraphNode)(uintptr_t)(i + 1),
                                                     CU_GRAPH_NODE_TYPE_KERNEL, -1 });
    cr_assert_eq(cap->nchanged, 100);
    cr_assert_eq(cap->changed[99].node, (CUgraphNode)(uintptr_t)100);
    cr_assert_eq(cap->changes_lost, 0);
    cap->eligible = 7;
    ctab_forget_changes(cap);
    cr_assert_eq(cap->nchanged, 0);
    cr_assert_eq(cap->eligible, 0);
    ctab_release(cap);
}

/* Another thread may end a relaxed capture, never one on its owner's
 * per-thread default stream, nor a global one. */
static struct capture *owned_elsewhere(CUstreamCaptureMode mode, CUstream origin)
{
    struct capture *cap = ctab_new();
    cap->mode = mode;
    cap->origin.real = origin;
    return cap;
}

static void *may_end(void *arg)
{
    return (void *)(uintptr_t)ctab_may_end_here(arg);
}

static int may_end_from_another_thread(struct capture *cap)
{
    pthread_t t;
    void *answer;
    cr_assert_eq(pthread_create(&t, NULL, may_end, cap), 0);
    pthread_join(t, &answer);
    return (int)(uintptr_t)answer;
}

Test(capture_table, who_may_end_a_capture)
{
    static char stream;
    struct capture *relaxed = owned_elsewhere(CU_STREAM_CAPTURE_MODE_RELAXED, (CUstream)&stream);
    struct capture *per_thread = owned_elsewhere(CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_PER_THREAD);
    struct capture *global = owned_elsewhere(CU_STREAM_CAPTURE_MODE_GLOBAL, (CUstream)&stream);
    relaxed->owner = per_thread->owner = global->owner = pthread_self();
    cr_assert_eq(ctab_may_end_here(global), 1, "the owner may");
    cr_assert_eq(may_end_from_another_thread(relaxed), 1);
    cr_assert_eq(may_end_from_another_thread(per_thread), 0);
    cr_assert_eq(may_end_from_another_thread(global), 0);
    ctab_release(relaxed);
    ctab_release(per_thread);
    ctab_release(global);
}

/* A stream wait joins its stream; past CAPTURE_MAX_STREAMS the capture
 * says once that it outgrew recap's following while its journal was
 * whole, and after ctab_journal_outgrown its journal is not replayable. */
Test(capture_table, a_capture_that_outgrows_its_streams_says_so_once)
{
    static char streams[CAPTURE_MAX_STREAMS + 2];
    struct capture *cap = begun(&streams[0]);
    cap->journal.replayable = 1;
    int said = 0, said_at = -1;
    for (int i = 1; i < CAPTURE_MAX_STREAMS + 2; i++) {
        union drv_args a = { .cuStreamWaitEvent = { (CUstream)&streams[i], (CUevent)0x10, 0 } };
        if (ctab_note_membership(cap, DRV_cuStreamWaitEvent, &a)) {
            said++;
            said_at = i;
            ctab_journal_outgrown(cap);
        }
    }
    cr_assert_eq(said, 1);
    cr_assert_eq(said_at, CAPTURE_MAX_STREAMS, "the origin and %d joined fill it",
                 CAPTURE_MAX_STREAMS - 1);
    cr_assert_eq(cap->journal.replayable, 0);
    cr_assert(strstr(cap->journal.why_not, "more streams or events") != NULL);
    cr_assert_eq(ctab_has_member(cap, &streams[1]), 1);
    ctab_unregister(cap);
    ctab_release(cap);
}
