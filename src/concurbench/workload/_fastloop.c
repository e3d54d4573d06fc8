/*
 * The compiled event loop of a worker process: pool.py's `_loop` and session.py's state machine in
 * C, so the harness spends about what pgbench spends per statement (docs/load-generator.md).
 *
 * It calls the libpq that psycopg itself uses: `bind(path)` takes the file of psycopg's compiled
 * pq module, already loaded, and looks the PQ* functions up through it with dlsym, which searches
 * that module's own dependencies. A PGconn made by psycopg is therefore only ever handed to
 * functions of the same libpq build (no headers or library of another libpq are involved).
 *
 * Python keeps everything that is rare: naming a failure, counting it, dropping and reopening a
 * connection, and the statistics (the loop hands over latencies in batches). A transaction's
 * parameters are drawn here when every one of them is uniform or constant (the session's own
 * Mersenne Twister, continued from Python's, so both loops draw the same values); other
 * distributions are drawn by Python. The state machine mirrors session.py step for step; the same
 * tests run against both (tests/integration/test_sessions.py). What Python hands the loop and gets
 * back crosses as structs this file and workload/seam.py both declare by name ("the seam" below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* The little of libpq's ABI used here, as libpq-fe.h declares it (these values have not changed since
   libpq introduced them); no libpq header is needed to build. */
typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;
enum { PGRES_EMPTY_QUERY = 0, PGRES_COMMAND_OK = 1, PGRES_TUPLES_OK = 2 };
enum { CONNECTION_BAD = 1 };
enum { PQTRANS_IDLE = 0 };
#define PG_DIAG_SQLSTATE 'C'
#define PG_DIAG_MESSAGE_PRIMARY 'M'

typedef struct {
    int (*sendQuery)(PGconn *, const char *);
    int (*sendQueryParams)(PGconn *, const char *, int, const unsigned int *, const char *const *, const int *,
                           const int *, int);
    int (*sendPrepare)(PGconn *, const char *, const char *, int, const unsigned int *);
    int (*sendQueryPrepared)(PGconn *, const char *, int, const char *const *, const int *, const int *, int);
    int (*consumeInput)(PGconn *);
    int (*isBusy)(PGconn *);
    PGresult *(*getResult)(PGconn *);
    int (*resultStatus)(const PGresult *);
    char *(*resultErrorField)(const PGresult *, int);
    char *(*resultErrorMessage)(const PGresult *);
    void (*clear)(PGresult *);
    char *(*errorMessage)(const PGconn *);
    int (*status)(const PGconn *);
    int (*transactionStatus)(const PGconn *);
    int (*flush)(PGconn *);
    int (*libVersion)(void);
} Libpq;
static Libpq pq;
static int bound = 0;

/* -- the seam: what Python and this loop pass each other ------------------------------ */
/* The version of this module's seam as a whole (its functions, their arguments and the structs below), stated
   here only: Python reads it from the module and stamps it in the head of every struct it packs; each struct
   read here must carry it. Raise it with any change of the seam. An older build is refused by its LAYOUTS
   (below), so a change that moves no member (what one means, run()'s arguments) raises the version of the
   struct it concerns too (LoopEnv's for run()). */
#define INTERFACE 8

/* The structs of the seam, as workload/seam.py declares them field by field (a Layout of the same name and
   version): native byte order, standard sizes, no padding. Each one with a head starts with this build's
   INTERFACE and its own version; another is refused (check_head). Change a struct with its version, here and
   in seam.py; the module exports LAYOUTS (every member's offset and size), which Python compares with its own. */
typedef struct {
    uint32_t interface, layout;
} Head;

/* A timed pool's schedule in this worker, as schedule.Pace.export gives it: the head, then n_segs segments.
   The version covers the way pace_arrival draws from the seed too. */
#define PACE_LAYOUT 2
typedef struct {
    uint32_t interface, layout;
    uint32_t n_segs;
    int32_t fixed;               /* fixed arrivals, else Poisson */
    int64_t limit, measure_from; /* latency limit (0: none); the measurement window's start */
    uint64_t seed;               /* of the stream of uniforms (uniform() below), as Pace's in Python */
} PaceHead;
#define SEG_LAYOUT 1
typedef struct {
    int64_t start, end;
    double per_ns; /* arrivals per nanosecond in the segment (this worker's share); 0: none */
    int64_t clients;
} PaceSeg;

/* One session as the loop starts it (fastloop._Glue's `spec`). */
#define SESSION_LAYOUT 1
typedef struct {
    uint32_t interface, layout;
    int32_t fd, slot, protocol, n_params, n_statements, max_tries, index, paced;
    uint64_t conn; /* the PGconn's address */
    int64_t think, transactions, latency_limit; /* ns; the count to run (-1: the window's); ns (0: none) */
} SessionSpec;

/* One session as the loop hands it back (fastloop._Glue.sync), followed by n_statements bytes: 1 where that
   statement is prepared on the connection. */
#define SYNC_LAYOUT 1
typedef struct {
    uint32_t interface, layout;
    int32_t state, step, attempt, retries, connected, n_statements;
    int64_t counted, finished, t0, s0, wake_at;
} SessionSync;

/* What a run is told once: session.py's states, the slot status of a finished session (pool.py), the wait. */
#define ENV_LAYOUT 1
typedef struct {
    uint32_t interface, layout;
    int32_t running, rolling_back, thinking, done, slot_done, wait;
} LoopEnv;

_Static_assert(sizeof(PaceHead) == 40 && sizeof(PaceSeg) == 32 && sizeof(SessionSpec) == 72 &&
               sizeof(SessionSync) == 72 && sizeof(LoopEnv) == 32, "the seam's structs have no padding");

/* The module's LAYOUTS: each struct's version, size and members (name, offset, size). */
typedef struct {
    const char *name;
    size_t offset, size;
} Member;
#define MEMBER(T, m) {#m, offsetof(T, m), sizeof(((T *)0)->m)}
static const Member PACE_HEAD_MEMBERS[] = {MEMBER(PaceHead, interface), MEMBER(PaceHead, layout),
    MEMBER(PaceHead, n_segs), MEMBER(PaceHead, fixed), MEMBER(PaceHead, limit), MEMBER(PaceHead, measure_from),
    MEMBER(PaceHead, seed)};
static const Member PACE_SEG_MEMBERS[] = {MEMBER(PaceSeg, start), MEMBER(PaceSeg, end), MEMBER(PaceSeg, per_ns),
    MEMBER(PaceSeg, clients)};
static const Member SESSION_MEMBERS[] = {MEMBER(SessionSpec, interface), MEMBER(SessionSpec, layout),
    MEMBER(SessionSpec, fd), MEMBER(SessionSpec, slot), MEMBER(SessionSpec, protocol), MEMBER(SessionSpec, n_params),
    MEMBER(SessionSpec, n_statements), MEMBER(SessionSpec, max_tries), MEMBER(SessionSpec, index),
    MEMBER(SessionSpec, paced), MEMBER(SessionSpec, conn), MEMBER(SessionSpec, think),
    MEMBER(SessionSpec, transactions), MEMBER(SessionSpec, latency_limit)};
static const Member SYNC_MEMBERS[] = {MEMBER(SessionSync, interface), MEMBER(SessionSync, layout),
    MEMBER(SessionSync, state), MEMBER(SessionSync, step), MEMBER(SessionSync, attempt), MEMBER(SessionSync, retries),
    MEMBER(SessionSync, connected), MEMBER(SessionSync, n_statements), MEMBER(SessionSync, counted),
    MEMBER(SessionSync, finished), MEMBER(SessionSync, t0), MEMBER(SessionSync, s0), MEMBER(SessionSync, wake_at)};
static const Member ENV_MEMBERS[] = {MEMBER(LoopEnv, interface), MEMBER(LoopEnv, layout), MEMBER(LoopEnv, running),
    MEMBER(LoopEnv, rolling_back), MEMBER(LoopEnv, thinking), MEMBER(LoopEnv, done), MEMBER(LoopEnv, slot_done),
    MEMBER(LoopEnv, wait)};
typedef struct {
    const char *name;
    int version;
    size_t size;
    const Member *members;
    size_t n;
} Struct;
#define STRUCT(T, v, M) {#T, v, sizeof(T), M, sizeof M / sizeof M[0]}
static const Struct STRUCTS[] = {STRUCT(PaceHead, PACE_LAYOUT, PACE_HEAD_MEMBERS),
    STRUCT(PaceSeg, SEG_LAYOUT, PACE_SEG_MEMBERS), STRUCT(SessionSpec, SESSION_LAYOUT, SESSION_MEMBERS),
    STRUCT(SessionSync, SYNC_LAYOUT, SYNC_MEMBERS), STRUCT(LoopEnv, ENV_LAYOUT, ENV_MEMBERS)};

/* A struct Python packed, before it is read: `len` bytes (at least sizeof, exactly unless `more` may follow),
   its head this build's INTERFACE and the struct's version. */
static int check_head(const char *name, const void *buf, Py_ssize_t len, size_t size, uint32_t version, int more) {
    if (len < (Py_ssize_t)size || (!more && len != (Py_ssize_t)size)) {
        PyErr_Format(PyExc_ValueError, "a %s of %zd bytes; this build reads %zu", name, len, size);
        return -1;
    }
    Head head;
    memcpy(&head, buf, sizeof head);
    if (head.interface != INTERFACE) {
        PyErr_Format(PyExc_ValueError, "a %s packed for interface %u; this build is interface %d (built from other "
                     "sources: rebuild the extension)", name, (unsigned)head.interface, INTERFACE);
        return -1;
    }
    if (head.layout != version) {
        PyErr_Format(PyExc_ValueError, "a %s of layout %u; this build reads layout %u (built from other sources: "
                     "rebuild the extension)", name, (unsigned)head.layout, (unsigned)version);
        return -1;
    }
    return 0;
}

/* A struct with its head from a bytes-like object (a SessionSpec, a LoopEnv), copied into `out`. */
static int read_struct(PyObject *obj, const char *name, void *out, size_t size, uint32_t version) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return -1;
    int rc = check_head(name, view.buf, view.len, size, version, 0);
    if (rc == 0) memcpy(out, view.buf, size);
    PyBuffer_Release(&view);
    return rc;
}

/* The protocols in the order of engines/postgres.py's PROTOCOLS, whose index a SessionSpec carries (exported as
   PROTOCOLS, which Python compares with its own). */
enum { PROTO_PREPARED = 0, PROTO_EXTENDED = 1, PROTO_SIMPLE = 2, N_PROTOCOLS = 3 };
static const char *const PROTOCOL_NAMES[N_PROTOCOLS] = {"prepared", "extended", "simple"};

/* session states (session.py) and the slot status a finished session gets (pool.py), from the LoopEnv */
static int RUNNING, ROLLING_BACK, THINKING, DONE, SLOT_DONE;
/* A session hands its latencies to Python every drain_at transactions: 4,096 at most, fewer when
   there are many sessions, so that all of them together hold about 64 k transactions at most. */
#define DRAIN_MAX 4096
#define DRAIN_MIN 16
#define DRAIN_ALL 65536
#define RECONNECT_BACKOFF_NS 100000000LL
#define PARENT_CHECK_NS 200000000LL
/* A session publishes its count (for the parent's progress line) at most this often: the workers'
   counters share cache lines, and a write per transaction would bounce them between the cores. */
#define PUBLISH_NS 20000000LL

typedef struct {
    const char *key;   /* prepared statement name */
    const char *text;  /* SQL with $1.. placeholders */
    int n_refs;
    int *refs;         /* $k -> index into the transaction's parameter texts */
    int n_pieces;      /* simple protocol with parameters: text pieces between the placeholders */
    const char **pieces;
    Py_ssize_t *piece_len;
    int *piece_ref;    /* after piece i: parameter index, or -1 */
} Plan;

typedef struct {
    int64_t *data;
    Py_ssize_t used, cap;
} Buf;

#define FAR (1LL << 62)

/* The schedule while the loop takes its arrivals. */
typedef struct {
    PyObject *owner; /* the exported schedule it was read from (the sessions of a pool share one) */
    int n_segs, k, fixed;
    PaceSeg *segs;
    int64_t trigger, limit, measure_from;
    int64_t held; /* an arrival handed back by a session not active when it is due; -1: none */
    uint64_t rng;
} Pace;

/* Parameters the loop draws itself (fastloop.draw_spec): uniform ones from the session's generator, which
   continues its Python random.Random word for word (getrandbits as CPython computes it), or constants. */
enum { DRAW_UNIFORM = 0, DRAW_CONSTANT = 1 };
#define MT_N 624
#define MT_M 397
typedef struct {
    uint32_t mt[MT_N];
    int index;
} Twister;

typedef struct {
    int kind, bits;
    int64_t low;
    uint64_t span;
    const char *constant; /* NULL: SQL NULL */
    char text[24];        /* the last uniform draw, as decimal text */
} Draw;

typedef struct Sess {
    PyObject *glue;
    PGconn *conn;  /* NULL: dropped; reconnected at the next attempt */
    int fd, registered, waiting_write, dead;
    int slot, protocol, n_statements, n_params, max_tries;
    Plan *plans;
    int state, step, attempt, retries, pending_prepare;
    int64_t t0, s0, wake_at, think, limit, counted, finished, publish_at;
    int64_t retried; /* retries of counted transactions not yet handed to Python */
    int64_t sends;   /* statements put on the wire (read_ahead's marker of progress; not reported) */
    int reported;    /* done: told Python */
    unsigned char *prepared;
    PGresult *error;
    PyObject *outcome; /* (class, key) of the last failed answer */
    PyObject *failure; /* (class, key) of the failure being handled */
    PyObject *args;    /* this transaction's parameter texts drawn by Python (a tuple) */
    const char **texts; /* this transaction's parameter texts, wherever they were drawn */
    Draw *draws;       /* NULL: Python draws the parameters */
    Twister *twister;
    const char **values;
    int64_t *timings;
    Buf txn, ends, *stmts;
    char *scratch;     /* simple protocol: the statement with its literals inlined */
    Py_ssize_t scratch_cap;
    Pace *pace;        /* timed pools only; NULL: the closed loop, untouched */
    int index, paced;
    int64_t due, lag, limit_ns, late, skipped;
    Buf lags;
} Sess;

typedef struct {
    Sess *s;
    int n;
    int epfd;
    int wait;      /* how the loop waits for its next due time (WAIT_*) */
    int tfd;       /* WAIT_TIMERFD: the timer in the epoll set; -1: none */
    int64_t armed; /* the time the timer is armed for; 0: disarmed; -1: expired and not yet re-armed */
    volatile int64_t *window;
    int64_t *counters;
    volatile int8_t *status;
    volatile int64_t *finished;
    int64_t measure_from;
    Sess **heap; /* sessions thinking (or waiting for their due time), by wake time */
    Pace *paces;
    int n_paces;
    int heap_n;
    int remaining;
    Py_ssize_t drain_at;
    PyObject *connection_kind, *retryable, *connection_failure, *result_failure;
    PyObject *keep; /* what the sessions point into or call: specs, plans, schedules, draw specs, failures' */
} Loop;

static PyObject *S_draw, *S_drain, *S_failed, *S_drop, *S_reconnect, *S_done, *S_sync;

static inline int64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* time.perf_counter_ns() on Linux */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* -- binding to psycopg's libpq -------------------------------------------------- */
static PyObject *fl_bind(PyObject *self, PyObject *args) {
    const char *path;
    int expected;
    if (!PyArg_ParseTuple(args, "si", &path, &expected)) return NULL;
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) {
        PyErr_Format(PyExc_RuntimeError, "psycopg's pq module %s is not loaded: %s", path, dlerror());
        return NULL;
    }
    Libpq found;
    struct { const char *name; void **slot; } names[] = {
        {"PQsendQuery", (void **)&found.sendQuery}, {"PQsendQueryParams", (void **)&found.sendQueryParams},
        {"PQsendPrepare", (void **)&found.sendPrepare}, {"PQsendQueryPrepared", (void **)&found.sendQueryPrepared},
        {"PQconsumeInput", (void **)&found.consumeInput}, {"PQisBusy", (void **)&found.isBusy},
        {"PQgetResult", (void **)&found.getResult}, {"PQresultStatus", (void **)&found.resultStatus},
        {"PQresultErrorField", (void **)&found.resultErrorField},
        {"PQresultErrorMessage", (void **)&found.resultErrorMessage}, {"PQclear", (void **)&found.clear},
        {"PQerrorMessage", (void **)&found.errorMessage}, {"PQstatus", (void **)&found.status},
        {"PQtransactionStatus", (void **)&found.transactionStatus}, {"PQflush", (void **)&found.flush},
        {"PQlibVersion", (void **)&found.libVersion},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *fn = dlsym(handle, names[i].name);
        if (fn == NULL) {
            PyErr_Format(PyExc_RuntimeError, "%s not found through %s", names[i].name, path);
            return NULL;
        }
        *names[i].slot = fn;
    }
    if (found.libVersion() != expected) {
        PyErr_Format(PyExc_RuntimeError, "the libpq found through %s is version %d, psycopg reports %d", path,
                     found.libVersion(), expected);
        return NULL;
    }
    pq = found; /* only a complete, checked set replaces the one in use */
    bound = 1;
    Dl_info info;
    if (dladdr((void *)pq.sendQuery, &info) && info.dli_fname) return PyUnicode_DecodeFSDefault(info.dli_fname);
    return PyUnicode_DecodeFSDefault(path);
}

/* -- buffers ----------------------------------------------------------------------- */
static int buf_push(Buf *b, int64_t v) {
    if (b->used == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 64;
        int64_t *data = PyMem_Realloc(b->data, cap * sizeof(int64_t));
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->cap = cap;
    }
    b->data[b->used++] = v;
    return 0;
}

static PyObject *buf_bytes(Buf *b) {
    return PyBytes_FromStringAndSize((const char *)b->data, b->used * (Py_ssize_t)sizeof(int64_t));
}

/* Hand the recorded latencies, completion times and retries to Python (glue.drain). */
static int drain(Sess *s) {
    if (s->txn.used == 0 && s->retried == 0 && s->skipped == 0 && s->late == 0) return 0;
    PyObject *stmts = PyTuple_New(s->n_statements);
    PyObject *txn = buf_bytes(&s->txn), *ends = buf_bytes(&s->ends), *lags = buf_bytes(&s->lags);
    PyObject *late = PyLong_FromLongLong(s->late), *skipped = PyLong_FromLongLong(s->skipped);
    int ok = stmts && txn && ends && lags && late && skipped;
    for (int i = 0; ok && i < s->n_statements; i++) {
        PyObject *b = buf_bytes(&s->stmts[i]);
        if (b == NULL) ok = 0; else PyTuple_SET_ITEM(stmts, i, b);
    }
    PyObject *retried = ok ? PyLong_FromLongLong(s->retried) : NULL;
    PyObject *r = retried ? PyObject_CallMethodObjArgs(s->glue, S_drain, txn, ends, stmts, retried, lags, late,
                                                       skipped, NULL) : NULL;
    Py_XDECREF(retried);
    Py_XDECREF(lags);
    Py_XDECREF(late);
    Py_XDECREF(skipped);
    Py_XDECREF(stmts);
    Py_XDECREF(txn);
    Py_XDECREF(ends);
    if (r == NULL) return -1;
    Py_DECREF(r);
    s->txn.used = s->ends.used = s->lags.used = 0;
    s->retried = s->late = s->skipped = 0;
    for (int i = 0; i < s->n_statements; i++) s->stmts[i].used = 0;
    return 0;
}

/* -- waiting for the next due time ------------------------------------------------ */
/* The loop waits on its sockets until the earliest due (or wake) time in its heap. epoll_wait takes whole
   milliseconds, and a wait rounded up to them sent a rate's transactions half a millisecond late on
   average. So the loop waits, best first, with epoll_pwait2 (a timeout in nanoseconds: Linux 5.11 and glibc
   2.35), else with a timerfd in the epoll set armed for the due time itself (one more system call a wait),
   else, where neither works, with epoll_wait rounding up as before. It probes at its start which works
   (an old kernel says ENOSYS, a sandbox may say EPERM). The kernel's timer slack (50 us by default, as for
   pgbench's ppoll) still applies to epoll_pwait2 and epoll_wait; a timerfd has none. */
enum { WAIT_PWAIT2 = 0, WAIT_TIMERFD = 1, WAIT_MS = 2, N_WAITS = 3 };
static const char *const WAIT_NAMES[N_WAITS] = {"epoll_pwait2", "timerfd", "epoll_wait"};
#define WAIT_CAP_NS 50000000LL /* the longest wait: the loop looks at its parent and at signals this often */
#define NS 1000000000LL

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define HAVE_PWAIT2 1
static int pwait2(int epfd, struct epoll_event *events, int n, const struct timespec *ts) {
    return epoll_pwait2(epfd, events, n, ts, NULL);
}
#elif defined(SYS_epoll_pwait2) && defined(__LP64__)
#define HAVE_PWAIT2 1 /* a C library without the wrapper: the system call, whose timespec is this ABI's */
static int pwait2(int epfd, struct epoll_event *events, int n, const struct timespec *ts) {
    return (int)syscall(SYS_epoll_pwait2, epfd, events, n, ts, NULL, 0);
}
#else
#define HAVE_PWAIT2 0
#endif

/* The loop's next wait from `now` until `wake_at` (-1: nothing due), as `mode` asks the kernel for it: *ts
   (epoll_pwait2), *timer (the timerfd's absolute expiry; 0: none) and *ms (epoll_wait, and the timerfd
   mode's backstop). Returns how long the wait lasts when no socket is ready sooner: 0 when wake_at has
   passed, else from wake_at (never earlier) to wake_at plus the mode's rounding (none but epoll_wait's),
   at most WAIT_CAP_NS. */
static int64_t plan_wait(int mode, int64_t now, int64_t wake_at, struct timespec *ts, int64_t *timer, int *ms) {
    int64_t wait = wake_at < 0 ? WAIT_CAP_NS : wake_at - now;
    wait = wait < 0 ? 0 : (wait > WAIT_CAP_NS ? WAIT_CAP_NS : wait);
    ts->tv_sec = (time_t)(wait / NS);
    ts->tv_nsec = (long)(wait % NS);
    *ms = (int)((wait + 999999) / 1000000);
    *timer = mode == WAIT_TIMERFD && wait > 0 && wait < WAIT_CAP_NS ? wake_at : 0;
    return mode == WAIT_MS ? *ms * 1000000LL : wait;
}

/* Arm the timer for `at` (absolute, CLOCK_MONOTONIC like clock_ns; 0 disarms). Setting a timerfd clears
   an expiry nobody read, so the loop never reads it: it re-arms (or disarms) before the next wait. */
static int arm(Loop *L, int64_t at) {
    struct itimerspec spec = {{0, 0}, {(time_t)(at / NS), (long)(at % NS)}};
    if (timerfd_settime(L->tfd, TFD_TIMER_ABSTIME, &spec, NULL) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    L->armed = at;
    return 0;
}

static int wait_events(Loop *L, struct epoll_event *events, int maxev, const struct timespec *ts, int ms) {
#if HAVE_PWAIT2
    if (L->wait == WAIT_PWAIT2) return pwait2(L->epfd, events, maxev, ts);
#endif
    return epoll_wait(L->epfd, events, maxev, ms);
}

/* Whether `mode` works on the epoll set `epfd` (for WAIT_TIMERFD, *tfd is the timer, added to the set). */
static int wait_works(int mode, int epfd, int *tfd) {
    if (mode == WAIT_PWAIT2) {
#if HAVE_PWAIT2
        struct epoll_event ev;
        struct timespec zero = {0, 0};
        return pwait2(epfd, &ev, 1, &zero) >= 0;
#else
        return 0;
#endif
    }
    if (mode == WAIT_TIMERFD) {
        *tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL: the timer, not a session */
        if (*tfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, *tfd, &ev) == 0) return 1;
        if (*tfd >= 0) close(*tfd);
        *tfd = -1;
        return 0;
    }
    return mode == WAIT_MS;
}

/* The loop's wait: `requested` (an index of WAIT_NAMES), or the best that works here when it is -1. */
static int setup_wait(Loop *L, int requested) {
    L->tfd = -1;
    if (requested >= N_WAITS) {
        PyErr_SetString(PyExc_ValueError, "no such wait");
        return -1;
    }
    for (int mode = requested < 0 ? 0 : requested; mode < N_WAITS; mode++) {
        if (wait_works(mode, L->epfd, &L->tfd)) {
            L->wait = mode;
            return 0;
        }
        if (requested >= 0) break;
    }
    PyErr_Format(PyExc_RuntimeError, "the compiled loop cannot wait with %s here",
                 WAIT_NAMES[requested < 0 ? WAIT_MS : requested]);
    return -1;
}

/* waits() -> tuple: the names of the waits that work here, best first (the loop takes the first). */
static PyObject *fl_waits(PyObject *self, PyObject *noargs) {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    PyObject *out = PyList_New(0);
    for (int mode = 0; out && mode < N_WAITS; mode++) {
        int tfd = -1;
        if (!wait_works(mode, epfd, &tfd)) continue;
        if (tfd >= 0) close(tfd);
        PyObject *name = PyUnicode_FromString(WAIT_NAMES[mode]);
        if (name == NULL || PyList_Append(out, name) < 0) Py_CLEAR(out);
        Py_XDECREF(name);
    }
    close(epfd);
    if (out == NULL) return NULL;
    Py_SETREF(out, PyList_AsTuple(out));
    return out;
}

/* plan_wait(mode, now, wake_at) -> (wait, pwait2 timeout, timer expiry, epoll_wait ms): the loop's next wait
   and what each call would be given (tests). */
static PyObject *fl_plan_wait(PyObject *self, PyObject *args) {
    int mode;
    long long now, wake_at;
    if (!PyArg_ParseTuple(args, "iLL", &mode, &now, &wake_at)) return NULL;
    if (mode < 0 || mode >= N_WAITS) {
        PyErr_SetString(PyExc_ValueError, "no such wait");
        return NULL;
    }
    struct timespec ts;
    int64_t timer;
    int ms;
    int64_t wait = plan_wait(mode, now, wake_at, &ts, &timer, &ms);
    return Py_BuildValue("(LLLi)", (long long)wait, (long long)ts.tv_sec * NS + ts.tv_nsec, (long long)timer, ms);
}

/* -- epoll and the think-time heap --------------------------------------------- */
static void watch(Loop *L, Sess *s) {
    if (s->conn == NULL || s->registered) return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, s->fd, &ev) == 0 || errno == EEXIST) s->registered = 1;
    s->waiting_write = 0;
}

static void unwatch(Loop *L, Sess *s) {
    if (s->registered) epoll_ctl(L->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    s->registered = 0;
    s->waiting_write = 0;
}

static int earlier(Sess *a, Sess *b) {
    return a->wake_at < b->wake_at || (a->wake_at == b->wake_at && a->slot < b->slot);
}

static void heap_push(Loop *L, Sess *s) {
    int i = L->heap_n++;
    L->heap[i] = s;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!earlier(L->heap[i], L->heap[parent])) break;
        Sess *t = L->heap[i]; L->heap[i] = L->heap[parent]; L->heap[parent] = t;
        i = parent;
    }
}

static Sess *heap_pop(Loop *L) {
    Sess *top = L->heap[0];
    L->heap[0] = L->heap[--L->heap_n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < L->heap_n && earlier(L->heap[l], L->heap[m])) m = l;
        if (r < L->heap_n && earlier(L->heap[r], L->heap[m])) m = r;
        if (m == i) break;
        Sess *t = L->heap[i]; L->heap[i] = L->heap[m]; L->heap[m] = t;
        i = m;
    }
    return top;
}

/* -- the schedule of a timed pool (schedule.py's Pace, step for step) ------------------ */
/* The next uniform in [0, 1) of the pool's stream: splitmix64, the top 53 bits times 2^-53. schedule.uniforms
   computes the same ones BATCH at a time (the n-th is a function of seed + n * golden alone), and a Poisson gap
   is -log1p(-u) / per_ns in both loops, with this C library's log1p (math.log1p in Python), so for the same
   seed both send the same arrivals (tests/unit/test_pace.py). */
static double uniform(Pace *p) {
    uint64_t z = (p->rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* When session `index` may start: now when it is active, else its next active time (FAR: never). */
static int64_t pace_gate(Pace *p, int index, int64_t now) {
    for (int i = 0; i < p->n_segs; i++) {
        const PaceSeg *g = &p->segs[i];
        if (g->end <= now) continue;
        if (index < g->clients) return g->start > now ? g->start : now;
    }
    return FAR;
}

static int64_t pace_arrival(Pace *p) {
    if (p->held >= 0) {
        int64_t held = p->held;
        p->held = -1;
        return held;
    }
    int64_t t = p->trigger;
    while (p->k < p->n_segs) {
        const PaceSeg *g = &p->segs[p->k];
        if (t < g->start) t = g->start;
        if (g->per_ns > 0) {
            double gap = p->fixed ? 1.0 / g->per_ns : -log1p(-uniform(p)) / g->per_ns;
            if ((double)t + gap < (double)g->end) {
                p->trigger = t = t + (int64_t)gap;
                return t;
            }
        }
        p->k++;
        t = g->end;
    }
    p->trigger = FAR;
    return FAR;
}

/* A free session takes its next transaction: returns when to start; *due is its due time (-1: none, ask
   again then). Arrivals already later than the latency limit are skipped (counted in the window). */
static int64_t pace_take(Pace *p, int index, int paced, int64_t now, int64_t end, int64_t *due, int64_t *skipped) {
    int64_t when = pace_gate(p, index, now);
    if (when != now || !paced) {
        *due = when != now ? -1 : now;
        return when;
    }
    int64_t d = pace_arrival(p);
    while (p->limit && d < FAR && now - d > p->limit) {
        if (p->measure_from <= d && d <= end) (*skipped)++;
        d = pace_arrival(p);
    }
    int64_t active_at = d < FAR && d > now ? pace_gate(p, index, d) : d;
    if (active_at != d) {
        /* due where this session is not active (a later segment with fewer clients): back to the stream,
           for an active session; this one asks again when it is active */
        p->held = d;
        *due = -1;
        return active_at;
    }
    *due = d;
    return d > now ? d : now;
}

static void free_pace(Pace *p) {
    PyMem_Free(p->segs);
    Py_CLEAR(p->owner);
}

/* Read an exported schedule (Pace.export): its head, checked for this build's interface and layout, and its
   segments. */
static int pace_from(PyObject *obj, Pace *p) {
    memset(p, 0, sizeof *p);
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return -1;
    PaceHead head;
    int ok = 0;
    if (check_head("PaceHead", view.buf, view.len, sizeof head, PACE_LAYOUT, 1) < 0) goto done;
    memcpy(&head, view.buf, sizeof head);
    if (head.n_segs < 1 || view.len != (Py_ssize_t)(sizeof head + head.n_segs * sizeof(PaceSeg))) {
        PyErr_Format(PyExc_ValueError, "a schedule of %zd bytes does not hold its %u segments", view.len,
                     (unsigned)head.n_segs);
        goto done;
    }
    p->segs = PyMem_Calloc(head.n_segs, sizeof(PaceSeg));
    if (p->segs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(p->segs, (const char *)view.buf + sizeof head, head.n_segs * sizeof(PaceSeg));
    p->owner = Py_NewRef(obj);
    p->n_segs = (int)head.n_segs;
    p->fixed = head.fixed != 0;
    p->limit = head.limit;
    p->measure_from = head.measure_from;
    p->trigger = p->segs[0].start; /* the stream starts where its first segment does */
    p->held = -1;
    p->rng = head.seed;
    ok = 1;
done:
    PyBuffer_Release(&view);
    return ok ? 0 : -1;
}

/* arrivals(schedule, frees) -> ([(when, due)], skipped): an exported schedule alone, for tests; `frees` are
   (session index, paced, now, window end) in the order sessions become free. */
static PyObject *fl_arrivals(PyObject *self, PyObject *args) {
    PyObject *obj, *frees;
    if (!PyArg_ParseTuple(args, "OO!", &obj, &PyList_Type, &frees)) return NULL;
    Pace p;
    if (pace_from(obj, &p) < 0) {
        free_pace(&p);
        return NULL;
    }
    PyObject *out = PyList_New(0);
    int64_t skipped = 0;
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(frees); i++) {
        int index, paced;
        long long now, end;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(frees, i), "iiLL", &index, &paced, &now, &end)) {
            Py_CLEAR(out);
            break;
        }
        int64_t due;
        int64_t when = pace_take(&p, index, paced, now, end, &due, &skipped);
        PyObject *item = Py_BuildValue("(LL)", (long long)when, (long long)due);
        if (item == NULL || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    free_pace(&p);
    if (out == NULL) return NULL;
    return Py_BuildValue("(NL)", out, (long long)skipped);
}

/* -- the state machine (session.py) ------------------------------------------------ */
static int begin(Loop *L, Sess *s, int64_t now);
static int start_attempt(Loop *L, Sess *s, int64_t now);
static int slow_path(Loop *L, Sess *s, int64_t now);

static void set_outcome(Sess *s, PyObject *outcome) { Py_XSETREF(s->outcome, outcome); }

/* A failure named by the engine module's functions (the pure loop uses the same ones). */
static int fail_connection(Loop *L, Sess *s) {
    const char *message = s->conn ? pq.errorMessage(s->conn) : "no connection";
    PyObject *text = PyBytes_FromString(message ? message : "");
    if (text == NULL) return -1;
    PyObject *f = PyObject_CallOneArg(L->connection_failure, text);
    Py_DECREF(text);
    if (f == NULL) return -1;
    set_outcome(s, f);
    return 0;
}

static int fail_result(Loop *L, Sess *s, PGresult *res) {
    const char *state = pq.resultErrorField(res, PG_DIAG_SQLSTATE);
    const char *message = pq.resultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (message == NULL || !*message) message = pq.resultErrorMessage(res);
    PyObject *st = state ? PyBytes_FromString(state) : Py_NewRef(Py_None);
    PyObject *msg = PyBytes_FromString(message ? message : "");
    PyObject *bad = PyBool_FromLong(pq.status(s->conn) == CONNECTION_BAD);
    PyObject *f = (st && msg) ? PyObject_CallFunctionObjArgs(L->result_failure, st, msg, bad, NULL) : NULL;
    Py_XDECREF(st);
    Py_XDECREF(msg);
    Py_XDECREF(bad);
    if (f == NULL) return -1;
    set_outcome(s, f);
    return 0;
}

static int is_connection_failure(Loop *L, Sess *s) {
    return PyUnicode_Compare(PyTuple_GET_ITEM(s->failure, 0), L->connection_kind) == 0;
}

static const char *param(Sess *s, int index) { return s->texts[index]; }

/* The statement with its parameters inlined as quoted literals (postgres._inline). */
static const char *inline_text(Sess *s, Plan *p) {
    Py_ssize_t need = 1;
    for (int i = 0; i < p->n_pieces; i++) {
        need += p->piece_len[i];
        if (p->piece_ref[i] >= 0) {
            const char *v = param(s, p->piece_ref[i]);
            need += v ? 2 * (Py_ssize_t)strlen(v) + 2 : 4;
        }
    }
    if (need > s->scratch_cap) {
        char *grown = PyMem_Realloc(s->scratch, need);
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        s->scratch = grown;
        s->scratch_cap = need;
    }
    char *out = s->scratch;
    for (int i = 0; i < p->n_pieces; i++) {
        memcpy(out, p->pieces[i], p->piece_len[i]);
        out += p->piece_len[i];
        if (p->piece_ref[i] < 0) continue;
        const char *v = param(s, p->piece_ref[i]);
        if (v == NULL) {
            memcpy(out, "NULL", 4);
            out += 4;
            continue;
        }
        *out++ = '\'';
        for (; *v; v++) {
            if (*v == '\'') *out++ = '\'';
            *out++ = *v;
        }
        *out++ = '\'';
    }
    *out = '\0';
    return s->scratch;
}

/* Put the session's step on the wire (StatementChannel.send); a refused send is a failure. */
static int send_step(Loop *L, Sess *s, int64_t now) {
    int i = s->step, ok;
    Plan *p = &s->plans[i];
    PGconn *conn = s->conn;
    if (s->dead) {
        ok = 0;
    } else {
        for (int k = 0; k < p->n_refs; k++) s->values[k] = param(s, p->refs[k]);
        if (s->protocol == PROTO_PREPARED) {
            if (s->prepared[i]) {
                ok = pq.sendQueryPrepared(conn, p->key, p->n_refs, s->values, NULL, NULL, 0);
            } else {
                s->pending_prepare = i;
                ok = pq.sendPrepare(conn, p->key, p->text, 0, NULL);
            }
        } else if (s->protocol == PROTO_EXTENDED) {
            ok = pq.sendQueryParams(conn, p->text, p->n_refs, NULL, s->values, NULL, NULL, 0);
        } else if (p->n_pieces) {
            const char *text = inline_text(s, p);
            if (text == NULL) return -1;
            ok = pq.sendQuery(conn, text);
        } else {
            ok = pq.sendQuery(conn, p->text);
        }
    }
    if (ok) {
        int flushed = pq.flush(conn);
        s->sends++;
        if (flushed == 0) return 0;
        if (flushed == 1 && s->registered) { /* the rest goes out when the socket is writable */
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = s};
            epoll_ctl(L->epfd, EPOLL_CTL_MOD, s->fd, &ev);
            s->waiting_write = 1;
            return 0;
        }
    }
    s->pending_prepare = -1;
    if (fail_connection(L, s) < 0) return -1;
    return slow_path(L, s, now);
}

/* The answers so far: 0 busy, 1 success, 2 failure (s->outcome set), -1 Python error. */
static int receive(Loop *L, Sess *s, int64_t now) {
    PGconn *conn = s->conn;
    if (!pq.consumeInput(conn)) return fail_connection(L, s) < 0 ? -1 : 2;
    if (pq.isBusy(conn)) return 0;
    PGresult *res;
    while ((res = pq.getResult(conn)) != NULL) {
        int st = pq.resultStatus(res);
        if (s->error == NULL && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY)
            s->error = res;
        else
            pq.clear(res);
        if (pq.isBusy(conn)) return 0; /* a multi-statement text: more results to come */
    }
    PGresult *error = s->error;
    s->error = NULL;
    if (s->pending_prepare >= 0) {
        int i = s->pending_prepare;
        s->pending_prepare = -1;
        if (error == NULL) {
            s->prepared[i] = 1;
            Plan *p = &s->plans[i];
            if (pq.sendQueryPrepared(conn, p->key, p->n_refs, s->values, NULL, NULL, 0) && pq.flush(conn) == 0)
                return 0;
            return fail_connection(L, s) < 0 ? -1 : 2;
        }
    }
    if (error == NULL) return 1;
    int r = fail_result(L, s, error);
    pq.clear(error);
    return r < 0 ? -1 : 2;
}

static int finish(Loop *L, Sess *s, int64_t now) {
    if (L->measure_from <= now && now <= L->window[2]) {
        s->finished++; /* a failed transaction counts toward `transactions:` too */
        PyObject *when = PyLong_FromLongLong(now), *retries = PyLong_FromLong(s->retries);
        PyObject *r = (when && retries) ? PyObject_CallMethodObjArgs(s->glue, S_failed, s->failure, retries, when, NULL)
                                        : NULL;
        Py_XDECREF(when);
        Py_XDECREF(retries);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    if (is_connection_failure(L, s)) {
        s->state = THINKING; /* back off before reconnecting */
        s->wake_at = now + RECONNECT_BACKOFF_NS;
        return 0;
    }
    if (s->think) {
        s->state = THINKING;
        s->wake_at = now + s->think;
        return 0;
    }
    return begin(L, s, now);
}

static int after_rollback(Loop *L, Sess *s, int64_t now) {
    int retryable = PySequence_Contains(L->retryable, PyTuple_GET_ITEM(s->failure, 0));
    if (retryable < 0) return -1;
    if (retryable && s->attempt + 1 < s->max_tries) {
        s->attempt++;
        s->retries++;
        return start_attempt(L, s, now);
    }
    return finish(L, s, now);
}

static int drop(Loop *L, Sess *s) {
    unwatch(L, s);
    s->conn = NULL;
    s->dead = 0;
    if (s->error) {
        pq.clear(s->error);
        s->error = NULL;
    }
    PyObject *r = PyObject_CallMethodObjArgs(s->glue, S_drop, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* A failure (s->outcome), or the answer to a ROLLBACK (whose own outcome is ignored). */
static int slow_path(Loop *L, Sess *s, int64_t now) {
    if (s->state == ROLLING_BACK) {
        Py_CLEAR(s->outcome);
        return after_rollback(L, s, now);
    }
    Py_XSETREF(s->failure, s->outcome);
    s->outcome = NULL;
    if (is_connection_failure(L, s)) {
        if (drop(L, s) < 0) return -1;
    } else if (pq.transactionStatus(s->conn) != PQTRANS_IDLE) {
        s->state = ROLLING_BACK;
        s->pending_prepare = -1;
        if (pq.sendQuery(s->conn, "ROLLBACK") && pq.flush(s->conn) >= 0) return 0;
        if (drop(L, s) < 0) return -1; /* cannot even roll back: the connection is gone */
    }
    return after_rollback(L, s, now);
}

static int complete(Loop *L, Sess *s, int64_t now) {
    if (s->think) {
        s->state = THINKING;
        s->wake_at = now + s->think;
        return 0;
    }
    return begin(L, s, now);
}

/* -- drawing parameters ---------------------------------------------------------------- */
/* The next 32-bit word of MT19937, as CPython's genrand_uint32 gives it. */
static uint32_t twister_next(Twister *t) {
    if (t->index >= MT_N) {
        for (int k = 0; k < MT_N; k++) {
            uint32_t y = (t->mt[k] & 0x80000000U) | (t->mt[(k + 1) % MT_N] & 0x7fffffffU);
            t->mt[k] = t->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1U) ? 0x9908b0dfU : 0U);
        }
        t->index = 0;
    }
    uint32_t y = t->mt[t->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    return y ^ (y >> 18);
}

/* random.getrandbits(k), 1 <= k <= 64: words from the least significant up, the last one's top bits. */
static uint64_t twister_bits(Twister *t, int k) {
    if (k <= 32) return twister_next(t) >> (32 - k);
    uint64_t low = twister_next(t);
    uint64_t high = twister_next(t) >> (64 - k);
    return low | (high << 32);
}

/* str(v) */
static const char *decimal(char *buf, int64_t v) {
    char *p = buf + 23;
    *p = '\0';
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    return p;
}

/* distributions._uniform, value for value: rejection sampling on getrandbits(bits). */
static void draw_here(Sess *s) {
    for (int i = 0; i < s->n_params; i++) {
        Draw *d = &s->draws[i];
        if (d->kind == DRAW_CONSTANT) {
            s->texts[i] = d->constant;
            continue;
        }
        uint64_t r = twister_bits(s->twister, d->bits);
        while (r >= d->span) r = twister_bits(s->twister, d->bits);
        s->texts[i] = decimal(d->text, (int64_t)((uint64_t)d->low + r));
    }
}

static int draw(Sess *s) {
    if (s->draws) {
        draw_here(s);
        return 0;
    }
    PyObject *args = PyObject_CallMethodObjArgs(s->glue, S_draw, NULL);
    if (args == NULL) return -1;
    int ok = PyTuple_Check(args) && PyTuple_GET_SIZE(args) == s->n_params;
    for (int i = 0; ok && i < s->n_params; i++) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        ok = v == Py_None || PyBytes_Check(v);
    }
    if (!ok) {
        Py_DECREF(args);
        PyErr_SetString(PyExc_TypeError, "draw() must return a tuple of bytes or None, one per parameter");
        return -1;
    }
    Py_XSETREF(s->args, args);
    for (int i = 0; i < s->n_params; i++) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        s->texts[i] = v == Py_None ? NULL : PyBytes_AS_STRING(v);
    }
    return 0;
}

/* A session's draws from its spec: None (Python draws), or (twister state: the 625 ints of
   random.Random.getstate()[1], or None when nothing is uniform; ((kind, low, span, bits, constant), ...)).
   Constants' bytes stay alive in `keep`. */
static int setup_draws(Sess *s, PyObject *spec, PyObject *keep) {
    if (spec == Py_None) return 0;
    PyObject *state, *params;
    if (!PyArg_ParseTuple(spec, "OO!", &state, &PyTuple_Type, &params)) return -1;
    if (PyTuple_GET_SIZE(params) != s->n_params) {
        PyErr_SetString(PyExc_ValueError, "one draw per parameter");
        return -1;
    }
    s->draws = PyMem_Calloc(s->n_params + 1, sizeof(Draw));
    if (s->draws == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (state != Py_None) {
        if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != MT_N + 1) {
            PyErr_SetString(PyExc_ValueError, "the twister state is random.Random.getstate()[1]");
            return -1;
        }
        s->twister = PyMem_Calloc(1, sizeof(Twister));
        if (s->twister == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < MT_N; i++) {
            s->twister->mt[i] = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, i));
            if (PyErr_Occurred()) return -1;
        }
        long index = PyLong_AsLong(PyTuple_GET_ITEM(state, MT_N));
        if (PyErr_Occurred()) return -1;
        if (index < 0 || index > MT_N) {
            PyErr_SetString(PyExc_ValueError, "the twister state's position is out of range");
            return -1;
        }
        s->twister->index = (int)index;
    }
    for (int i = 0; i < s->n_params; i++) {
        Draw *d = &s->draws[i];
        long long low;
        unsigned long long span;
        PyObject *constant;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, i), "iLKiO", &d->kind, &low, &span, &d->bits, &constant))
            return -1;
        d->low = low;
        d->span = span;
        if (d->kind == DRAW_UNIFORM && (s->twister == NULL || d->bits < 1 || d->bits > 64 || span == 0)) {
            PyErr_SetString(PyExc_ValueError, "a uniform draw needs the twister state, 1 to 64 bits and a span");
            return -1;
        }
        if (d->kind == DRAW_CONSTANT) {
            if (constant != Py_None && !PyBytes_Check(constant)) {
                PyErr_SetString(PyExc_TypeError, "a constant's text is bytes or None");
                return -1;
            }
            if (constant != Py_None && PyList_Append(keep, constant) < 0) return -1;
            d->constant = constant == Py_None ? NULL : PyBytes_AS_STRING(constant);
        }
    }
    return 0;
}

/* draws(spec, n) -> [tuple of bytes or None]: n transactions' parameters as the loop draws them (tests). */
static PyObject *fl_draws(PyObject *self, PyObject *args) {
    PyObject *spec, *params;
    int n;
    if (!PyArg_ParseTuple(args, "Oi", &spec, &n)) return NULL;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || !PyTuple_Check(params = PyTuple_GET_ITEM(spec, 1))) {
        PyErr_SetString(PyExc_TypeError, "draws(spec, n): spec is (state, draws)");
        return NULL;
    }
    Sess s;
    memset(&s, 0, sizeof s);
    s.n_params = (int)PyTuple_GET_SIZE(params);
    PyObject *keep = PyList_New(0), *out = PyList_New(0);
    s.texts = PyMem_Calloc(s.n_params + 1, sizeof(char *));
    if (keep && out && s.texts && setup_draws(&s, spec, keep) == 0) {
        for (int k = 0; k < n && out; k++) {
            draw_here(&s);
            PyObject *row = PyTuple_New(s.n_params);
            for (int i = 0; row && i < s.n_params; i++) {
                PyObject *v = s.texts[i] ? PyBytes_FromString(s.texts[i]) : Py_NewRef(Py_None);
                if (v == NULL) Py_CLEAR(row);
                else PyTuple_SET_ITEM(row, i, v);
            }
            if (row == NULL || PyList_Append(out, row) < 0) Py_CLEAR(out);
            Py_XDECREF(row);
        }
    } else {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        Py_CLEAR(out);
    }
    PyMem_Free(s.texts);
    PyMem_Free(s.draws);
    PyMem_Free(s.twister);
    Py_XDECREF(keep);
    return out;
}

static int begin(Loop *L, Sess *s, int64_t now) {
    if (now >= L->window[2] || (s->limit >= 0 && s->finished >= s->limit)) {
        s->state = DONE;
        return 0;
    }
    int64_t due = now;
    if (s->pace) {
        due = s->due;
        s->due = -1;
        if (due < 0) {
            int64_t when = pace_take(s->pace, s->index, s->paced, now, L->window[2], &due, &s->skipped);
            if (when >= FAR) {
                s->state = DONE;
                return 0;
            }
            if (when > now) { /* wait for the arrival (or for the pool to need this session again) */
                s->due = due;
                s->state = THINKING;
                s->wake_at = when;
                return 0;
            }
        }
    }
    /* The transaction's time includes drawing its parameters, its first statement's not; with a rate it
       runs from the due time (coordinated-omission-correct), and the lag is kept apart. */
    s->t0 = due;
    if (s->n_params) {
        if (draw(s) < 0) return -1;
        now = clock_ns();
    }
    s->lag = now - due;
    s->attempt = 0;
    s->retries = 0;
    return start_attempt(L, s, now);
}

static int start_attempt(Loop *L, Sess *s, int64_t now) {
    if (s->conn == NULL) {
        PyObject *r = PyObject_CallMethodObjArgs(s->glue, S_reconnect, NULL);
        if (r == NULL) return -1;
        if (r == Py_None) {
            Py_DECREF(r);
            PyObject *f = Py_BuildValue("(Os)", L->connection_kind, "connection: cannot reconnect");
            if (f == NULL) return -1;
            Py_XSETREF(s->failure, f);
            return finish(L, s, now);
        }
        unsigned long long ptr;
        int fd;
        int ok = PyArg_ParseTuple(r, "Ki", &ptr, &fd);
        Py_DECREF(r);
        if (!ok) return -1;
        s->conn = (PGconn *)(uintptr_t)ptr;
        s->fd = fd;
        s->registered = s->dead = 0;
        s->pending_prepare = -1;
        memset(s->prepared, 0, s->n_statements);
    }
    watch(L, s);
    s->step = 0;
    s->s0 = now;
    s->state = RUNNING;
    return send_step(L, s, now);
}

/* The socket has data: advance as far as the answers allow (Session.readable). */
static int readable(Loop *L, Sess *s, int64_t now) {
    int r = receive(L, s, now);
    if (r <= 0) return r;
    if (r == 2 || s->state != RUNNING) return slow_path(L, s, now);
    s->timings[s->step] = now - s->s0;
    int step = s->step + 1;
    if (step < s->n_statements) {
        s->step = step;
        s->s0 = now;
        return send_step(L, s, now);
    }
    /* The transaction is complete; record it, then start the next one right here. */
    int64_t end = L->window[2];
    if (L->measure_from <= now && now <= end) {
        s->finished++;
        s->counted++;
        if (buf_push(&s->txn, now - s->t0) < 0 || buf_push(&s->ends, now) < 0) return -1;
        for (int i = 0; i < s->n_statements; i++)
            if (buf_push(&s->stmts[i], s->timings[i]) < 0) return -1;
        if (now >= s->publish_at) {
            L->counters[s->slot] = s->counted;
            s->publish_at = now + PUBLISH_NS;
        }
        s->retried += s->retries;
        if (s->paced) {
            if (buf_push(&s->lags, s->lag) < 0) return -1;
            if (s->limit_ns && now - s->t0 > s->limit_ns) s->late++;
        }
        if (s->txn.used >= L->drain_at && drain(s) < 0) return -1;
    }
    if (s->think || s->pace || now >= end || (s->limit >= 0 && s->finished >= s->limit)) return complete(L, s, now);
    s->attempt = s->retries = s->step = 0;
    s->t0 = s->s0 = now;
    if (s->n_params) {
        if (draw(s) < 0) return -1;
        s->s0 = clock_ns();
    }
    return send_step(L, s, s->s0);
}

/* After a step: a finished session is marked done, a thinking one waits in the heap (pool._loop). */
static int settle(Loop *L, Sess *s) {
    if (s->state == DONE) {
        if (s->reported) return 0;
        s->reported = 1;
        unwatch(L, s);
        L->counters[s->slot] = s->counted;
        L->finished[s->slot] = clock_ns();
        L->status[s->slot] = (int8_t)SLOT_DONE;
        L->remaining--;
        if (drain(s) < 0) return -1;
        PyObject *counted = PyLong_FromLongLong(s->counted), *finished = PyLong_FromLongLong(s->finished);
        PyObject *r = (counted && finished) ? PyObject_CallMethodObjArgs(s->glue, S_done, counted, finished, NULL)
                                            : NULL;
        Py_XDECREF(counted);
        Py_XDECREF(finished);
        if (r == NULL) return -1;
        Py_DECREF(r);
    } else if (s->state == THINKING) {
        heap_push(L, s);
    } else {
        watch(L, s);
    }
    return 0;
}

/* An event on a session that is not waiting for an answer: data or the end of an idle connection.
   Read it, so that a closed socket does not wake the loop again and again; a dead connection fails
   the next send. */
static void idle_input(Loop *L, Sess *s) {
    if (s->conn && !s->dead && !pq.consumeInput(s->conn)) {
        s->dead = 1;
        unwatch(L, s);
    }
}

static int writable(Loop *L, Sess *s, int64_t now) {
    int f = pq.flush(s->conn);
    if (f == 1) return 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
    epoll_ctl(L->epfd, EPOLL_CTL_MOD, s->fd, &ev);
    s->waiting_write = 0;
    if (f == 0) return 0;
    if (fail_connection(L, s) < 0) return -1;
    return slow_path(L, s, now);
}

/* Read a session's answers, and after each statement it sends, try once to read that statement's answer
   before going back to epoll_wait, as pgbench does (one recv). On shared cores the send often lets the
   backend run at once, so the answer is there: without this the loop found it with an extra epoll_wait,
   often one that blocked (a wakeup). At most READ_AHEAD in a row, so the others' turn comes soon. */
#define READ_AHEAD 64
static int read_ahead(Loop *L, Sess *s) {
    int rc = 0;
    for (int i = 0; rc == 0 && i < READ_AHEAD; i++) {
        int64_t sends = s->sends;
        rc = readable(L, s, clock_ns());
        if (s->state != RUNNING || s->waiting_write || s->sends == sends) break;
    }
    return rc;
}

/* No other Python thread to let run while we wait (a worker's usual case): then the wait keeps the
   GIL, which saves a tenth of the loop's instructions per statement. */
static int alone(void) {
    PyThreadState *me = PyThreadState_Get();
    PyThreadState *head = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me));
    return head == me && PyThreadState_Next(head) == NULL;
}

static int step_loop(Loop *L) {
    int64_t now = clock_ns();
    for (int i = 0; i < L->n; i++) {
        Sess *s = &L->s[i];
        if (begin(L, s, clock_ns()) < 0 || settle(L, s) < 0) return -1;
    }
    int maxev = L->n > 0 ? L->n : 1;
    struct epoll_event *events = PyMem_Calloc(maxev, sizeof *events);
    if (events == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    pid_t parent = getppid();
    int64_t next_check = now;
    int rc = 0;
    while (L->remaining) {
        now = clock_ns();
        if (now >= L->window[2]) break;
        if (now >= next_check) { /* a killed harness must not leave its workers behind */
            if (getppid() != parent) break;
            if (PyErr_CheckSignals() < 0) {
                rc = -1;
                break;
            }
            next_check = now + PARENT_CHECK_NS;
        }
        struct timespec ts;
        int64_t timer;
        int ms;
        int64_t wait = plan_wait(L->wait, now, L->heap_n ? L->heap[0]->wake_at : -1, &ts, &timer, &ms);
        if (L->tfd >= 0 && wait > 0 && timer != L->armed && arm(L, timer) < 0) { /* a poll is no wait */
            rc = -1;
            break;
        }
        int n;
        if (wait == 0 || alone()) {
            n = wait_events(L, events, maxev, &ts, ms);
        } else {
            Py_BEGIN_ALLOW_THREADS
            n = wait_events(L, events, maxev, &ts, ms);
            Py_END_ALLOW_THREADS
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            PyErr_SetFromErrno(PyExc_OSError);
            rc = -1;
            break;
        }
        for (int e = 0; e < n && rc == 0; e++) {
            Sess *s = events[e].data.ptr;
            if (s == NULL) { /* the timer expired: re-armed (or disarmed) before the next wait */
                L->armed = -1;
                continue;
            }
            if (s->state != RUNNING && s->state != ROLLING_BACK) {
                idle_input(L, s);
                continue;
            }
            if ((events[e].events & EPOLLOUT) && s->waiting_write) {
                rc = writable(L, s, clock_ns());
                if (rc < 0) break;
                if (s->waiting_write || !(events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
                if (s->state != RUNNING && s->state != ROLLING_BACK) {
                    rc = settle(L, s);
                    continue;
                }
            }
            rc = read_ahead(L, s);
            if (rc == 0 && s->state != RUNNING) rc = settle(L, s);
        }
        while (rc == 0 && L->heap_n && L->heap[0]->wake_at <= clock_ns()) {
            Sess *s = heap_pop(L);
            rc = begin(L, s, clock_ns());
            if (rc == 0) rc = settle(L, s);
        }
        if (rc < 0) break;
    }
    PyMem_Free(events);
    return rc;
}

/* -- set-up and hand-back ---------------------------------------------------------- */
static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t count, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0) return -1;
    if (view->len < itemsize * count) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", what, view->len, itemsize * count);
        return -1;
    }
    return 0;
}

static int setup_plan(Loop *L, Plan *p, PyObject *spec, int n_params) {
    PyObject *key, *text, *refs, *pieces;
    if (!PyArg_ParseTuple(spec, "SSO!O", &key, &text, &PyTuple_Type, &refs, &pieces)) return -1;
    p->key = PyBytes_AS_STRING(key);
    p->text = PyBytes_AS_STRING(text);
    p->n_refs = (int)PyTuple_GET_SIZE(refs);
    p->refs = PyMem_Calloc(p->n_refs + 1, sizeof(int));
    if (p->refs == NULL) return -1;
    for (int k = 0; k < p->n_refs; k++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(refs, k));
        if (v < 0 || v >= n_params) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "parameter reference out of range");
            return -1;
        }
        p->refs[k] = (int)v;
    }
    if (pieces == Py_None) return 0;
    /* (text, index, text, index, ..., text): the statement split at its placeholders */
    if (!PyTuple_Check(pieces) || PyTuple_GET_SIZE(pieces) % 2 == 0) {
        PyErr_SetString(PyExc_TypeError, "pieces must be a tuple (text, index, ..., text)");
        return -1;
    }
    int n = (int)(PyTuple_GET_SIZE(pieces) + 1) / 2;
    p->n_pieces = n;
    p->pieces = PyMem_Calloc(n, sizeof(char *));
    p->piece_len = PyMem_Calloc(n, sizeof(Py_ssize_t));
    p->piece_ref = PyMem_Calloc(n, sizeof(int));
    if (!p->pieces || !p->piece_len || !p->piece_ref) return -1;
    for (int i = 0; i < n; i++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, 2 * i);
        if (!PyBytes_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "statement pieces must be bytes");
            return -1;
        }
        p->pieces[i] = PyBytes_AS_STRING(piece);
        p->piece_len[i] = PyBytes_GET_SIZE(piece);
        p->piece_ref[i] = -1;
        if (2 * i + 1 < PyTuple_GET_SIZE(pieces)) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(pieces, 2 * i + 1));
            if (v < 0 || v >= n_params) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "parameter reference out of range");
                return -1;
            }
            p->piece_ref[i] = (int)v;
        }
    }
    return 0;
}

/* obj.<name>, kept alive in L->keep while the loop runs (the plans and draws point into it): a borrowed
   reference, NULL on an error. */
static PyObject *kept_attr(Loop *L, PyObject *obj, const char *name) {
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL) return NULL;
    int rc = PyList_Append(L->keep, v);
    Py_DECREF(v);
    return rc < 0 ? NULL : v;
}

/* A session from its glue (fastloop._Glue), read by attribute: `spec` (a SessionSpec), `plans` (one Plan a
   statement), `pace` (its pool's exported schedule, or None) and `draws` (fastloop.draw_spec, or None), read
   once when the loop starts. */
static int setup_session(Loop *L, Sess *s, PyObject *glue, Py_ssize_t n_slots) {
    SessionSpec spec;
    PyObject *spec_o = kept_attr(L, glue, "spec");
    if (spec_o == NULL || read_struct(spec_o, "SessionSpec", &spec, sizeof spec, SESSION_LAYOUT) < 0) return -1;
    if (spec.protocol < 0 || spec.protocol >= N_PROTOCOLS || spec.n_params < 0 || spec.n_statements < 0) {
        PyErr_SetString(PyExc_ValueError, "a SessionSpec's protocol, n_params or n_statements is out of range");
        return -1;
    }
    PyObject *plans = kept_attr(L, glue, "plans"), *pace = kept_attr(L, glue, "pace");
    PyObject *draws = kept_attr(L, glue, "draws");
    if (plans == NULL || pace == NULL || draws == NULL) return -1;
    if (!PyTuple_Check(plans) || PyTuple_GET_SIZE(plans) != spec.n_statements) {
        PyErr_SetString(PyExc_ValueError, "a session's plans must be a tuple of its n_statements plans");
        return -1;
    }
    s->fd = spec.fd;
    s->slot = spec.slot;
    s->protocol = spec.protocol;
    s->n_params = spec.n_params;
    s->max_tries = spec.max_tries;
    s->index = spec.index;
    s->paced = spec.paced;
    s->due = -1;
    s->limit_ns = spec.latency_limit;
    if (pace != Py_None) { /* the sessions of a pool share its one exported schedule */
        for (int i = 0; i < L->n_paces && s->pace == NULL; i++)
            if (L->paces[i].owner == pace) s->pace = &L->paces[i];
        if (s->pace == NULL) {
            s->pace = &L->paces[L->n_paces++];
            if (pace_from(pace, s->pace) < 0) return -1;
        }
    }
    if (s->slot < 0 || s->slot >= n_slots) {
        PyErr_SetString(PyExc_ValueError, "session slot out of range");
        return -1;
    }
    s->glue = Py_NewRef(glue);
    s->conn = (PGconn *)(uintptr_t)spec.conn;
    s->think = spec.think;
    s->limit = spec.transactions;
    s->pending_prepare = -1;
    s->n_statements = (int)PyTuple_GET_SIZE(plans);
    int n = s->n_statements > 0 ? s->n_statements : 1;
    s->plans = PyMem_Calloc(n, sizeof(Plan));
    s->prepared = PyMem_Calloc(n, 1);
    s->timings = PyMem_Calloc(n, sizeof(int64_t));
    s->stmts = PyMem_Calloc(n, sizeof(Buf));
    s->values = PyMem_Calloc(s->n_params + 1, sizeof(char *));
    s->texts = PyMem_Calloc(s->n_params + 1, sizeof(char *));
    if (!s->plans || !s->prepared || !s->timings || !s->stmts || !s->values || !s->texts) {
        PyErr_NoMemory();
        return -1;
    }
    if (setup_draws(s, draws, L->keep) < 0) return -1;
    for (int i = 0; i < s->n_statements; i++)
        if (setup_plan(L, &s->plans[i], PyTuple_GET_ITEM(plans, i), s->n_params) < 0) return -1;
    return 0;
}

/* Hand the session back to Python as the pure loop would leave it: glue.sync(a SessionSync and the prepared
   flags, the failure being handled or None). */
static int hand_back(Loop *L, Sess *s) {
    if (s->glue == NULL) return 0;
    if (drain(s) < 0) return -1; /* what was measured is kept, also after an error */
    if (s->error) {
        pq.clear(s->error);
        s->error = NULL;
    }
    SessionSync sync = {.interface = INTERFACE, .layout = SYNC_LAYOUT, .state = s->state, .step = s->step,
                        .attempt = s->attempt, .retries = s->retries, .connected = s->conn != NULL,
                        .n_statements = s->n_statements, .counted = s->counted, .finished = s->finished,
                        .t0 = s->t0, .s0 = s->s0, .wake_at = s->wake_at};
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof sync + s->n_statements));
    if (data == NULL) return -1;
    memcpy(PyBytes_AS_STRING(data), &sync, sizeof sync);
    if (s->n_statements) memcpy(PyBytes_AS_STRING(data) + sizeof sync, s->prepared, s->n_statements);
    PyObject *r = PyObject_CallMethodObjArgs(s->glue, S_sync, data, s->failure ? s->failure : Py_None, NULL);
    Py_DECREF(data);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static void free_session(Sess *s) {
    for (int i = 0; s->plans && i < s->n_statements; i++) {
        PyMem_Free(s->plans[i].refs);
        PyMem_Free(s->plans[i].pieces);
        PyMem_Free(s->plans[i].piece_len);
        PyMem_Free(s->plans[i].piece_ref);
    }
    for (int i = 0; s->stmts && i < s->n_statements; i++) PyMem_Free(s->stmts[i].data);
    PyMem_Free(s->plans);
    PyMem_Free(s->prepared);
    PyMem_Free(s->timings);
    PyMem_Free(s->stmts);
    PyMem_Free(s->values);
    PyMem_Free(s->texts);
    PyMem_Free(s->draws);
    PyMem_Free(s->twister);
    PyMem_Free(s->txn.data);
    PyMem_Free(s->ends.data);
    PyMem_Free(s->lags.data);
    PyMem_Free(s->scratch);
    Py_CLEAR(s->glue);
    Py_CLEAR(s->args);
    Py_CLEAR(s->failure);
    Py_CLEAR(s->outcome);
}

/* run(sessions, window, status, finished, counters, env, failures): `sessions` their glues (fastloop._Glue), `env`
   a LoopEnv, `failures` what names a failure (fastloop.Failures, read by attribute: `connection`, the class of a
   lost connection; `retryable`, the classes worth a retry; `connection_failure` and `result_failure`, the engine's
   functions that name one). */
static PyObject *fl_run(PyObject *self, PyObject *args) {
    PyObject *sessions, *window_o, *status_o, *finished_o, *counters_o, *env_o, *failures;
    if (!PyArg_ParseTuple(args, "O!OOOOOO", &PyList_Type, &sessions, &window_o, &status_o, &finished_o, &counters_o,
                          &env_o, &failures))
        return NULL;
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() to psycopg's libpq first");
        return NULL;
    }
    LoopEnv env;
    if (read_struct(env_o, "LoopEnv", &env, sizeof env, ENV_LAYOUT) < 0) return NULL;
    RUNNING = env.running;
    ROLLING_BACK = env.rolling_back;
    THINKING = env.thinking;
    DONE = env.done;
    SLOT_DONE = env.slot_done;
    Loop L;
    memset(&L, 0, sizeof L);
    Py_buffer window = {0}, status = {0}, finished = {0}, counters = {0};
    L.n = (int)PyList_GET_SIZE(sessions);
    L.epfd = L.tfd = -1;
    int ok = 0;
    L.keep = PyList_New(0);
    if (L.keep == NULL) return NULL;
    L.connection_kind = kept_attr(&L, failures, "connection");
    L.retryable = kept_attr(&L, failures, "retryable");
    L.connection_failure = kept_attr(&L, failures, "connection_failure");
    L.result_failure = kept_attr(&L, failures, "result_failure");
    if (!L.connection_kind || !L.retryable || !L.connection_failure || !L.result_failure) goto release;
    if (!PyUnicode_Check(L.connection_kind)) {
        PyErr_SetString(PyExc_TypeError, "failures.connection must be a str");
        goto release;
    }
    if (get_buffer(window_o, &window, 8, 3, "window") < 0) goto release;
    if (get_buffer(status_o, &status, 1, 0, "status") < 0) goto release;
    if (get_buffer(finished_o, &finished, 8, 0, "finished") < 0) goto release;
    if (get_buffer(counters_o, &counters, 8, 0, "counters") < 0) goto release;
    Py_ssize_t slots = status.len;
    if (finished.len / 8 < slots || counters.len / 8 < slots) {
        PyErr_SetString(PyExc_ValueError, "status, finished and counters must have one entry per slot");
        goto release;
    }
    L.window = window.buf;
    L.status = status.buf;
    L.finished = finished.buf;
    L.counters = counters.buf;
    L.s = PyMem_Calloc(L.n > 0 ? L.n : 1, sizeof(Sess));
    L.heap = PyMem_Calloc(L.n > 0 ? L.n : 1, sizeof(Sess *));
    L.paces = PyMem_Calloc(L.n > 0 ? L.n : 1, sizeof(Pace));
    if (L.s == NULL || L.heap == NULL || L.paces == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    for (int i = 0; i < L.n; i++)
        if (setup_session(&L, &L.s[i], PyList_GET_ITEM(sessions, i), slots) < 0) goto release;
    L.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L.epfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto release;
    }
    if (setup_wait(&L, env.wait) < 0) goto release;
    L.remaining = L.n;
    L.drain_at = L.n > 0 ? DRAIN_ALL / L.n : DRAIN_MAX;
    L.drain_at = L.drain_at > DRAIN_MAX ? DRAIN_MAX : (L.drain_at < DRAIN_MIN ? DRAIN_MIN : L.drain_at);
    L.measure_from = L.window[1];
    ok = step_loop(&L) == 0;
release:;
    /* whatever happened, every session goes back to Python in a state the pure loop could leave */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    for (int i = 0; L.s && i < L.n; i++) {
        if (hand_back(&L, &L.s[i]) < 0) {
            ok = 0;
            if (type == NULL) PyErr_Fetch(&type, &value, &tb);
            else PyErr_Clear();
        }
        free_session(&L.s[i]);
    }
    PyErr_Restore(type, value, tb);
    if (L.tfd >= 0) close(L.tfd);
    if (L.epfd >= 0) close(L.epfd);
    PyMem_Free(L.s);
    PyMem_Free(L.heap);
    for (int i = 0; i < L.n_paces; i++) free_pace(&L.paces[i]);
    PyMem_Free(L.paces);
    Py_XDECREF(L.keep);
    if (window.obj) PyBuffer_Release(&window);
    if (status.obj) PyBuffer_Release(&status);
    if (finished.obj) PyBuffer_Release(&finished);
    if (counters.obj) PyBuffer_Release(&counters);
    if (!ok) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "the compiled loop stopped");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", fl_bind, METH_VARARGS,
     "bind(path, version) -> str: use the libpq that the loaded module at `path` links (psycopg's pq module); "
     "returns the libpq file."},
    {"run", fl_run, METH_VARARGS,
     "run(sessions, window, status, finished, counters, env, failures): step the sessions (their glues) until the "
     "window ends or all are done (see fastloop.py)."},
    {"arrivals", fl_arrivals, METH_VARARGS,
     "arrivals(schedule, frees) -> ([(when, due)], skipped): the answers of a schedule (Pace.export) to sessions "
     "becoming free at the given times, as the loop computes them (for tests)."},
    {"waits", fl_waits, METH_NOARGS,
     "waits() -> tuple: the names of the ways to wait for a due time that work here, best first (the loop's "
     "choice)."},
    {"plan_wait", fl_plan_wait, METH_VARARGS,
     "plan_wait(mode, now, wake_at) -> (wait, pwait2 ns, timer expiry, epoll_wait ms): the loop's next wait "
     "with that mode when no socket is ready sooner, and what each call is given (for tests)."},
    {"draws", fl_draws, METH_VARARGS,
     "draws(spec, n) -> [tuple]: n transactions' parameter texts as the loop draws them from a session's draw "
     "spec (for tests)."},
    {NULL, NULL, 0, NULL},
};

/* LAYOUTS: {struct: (version, size, ((member, offset, size), ...))}, the seam's structs as this build has them
   (seam.describe() gives Python's side in the same form). */
static PyObject *layouts(void) {
    PyObject *out = PyDict_New();
    for (size_t i = 0; out && i < sizeof STRUCTS / sizeof STRUCTS[0]; i++) {
        const Struct *t = &STRUCTS[i];
        PyObject *members = PyTuple_New((Py_ssize_t)t->n);
        for (size_t k = 0; members && k < t->n; k++) {
            PyObject *m = Py_BuildValue("(snn)", t->members[k].name, (Py_ssize_t)t->members[k].offset,
                                        (Py_ssize_t)t->members[k].size);
            if (m == NULL) Py_CLEAR(members);
            else PyTuple_SET_ITEM(members, (Py_ssize_t)k, m);
        }
        PyObject *entry = members ? Py_BuildValue("(inN)", t->version, (Py_ssize_t)t->size, members) : NULL;
        if (entry == NULL || PyDict_SetItemString(out, t->name, entry) < 0) Py_CLEAR(out);
        Py_XDECREF(entry);
    }
    return out;
}

/* A tuple of the names in `list`. */
static PyObject *names(const char *const *list, int n) {
    PyObject *out = PyTuple_New(n);
    for (int i = 0; out && i < n; i++) {
        PyObject *name = PyUnicode_FromString(list[i]);
        if (name == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, name);
    }
    return out;
}

/* The module's attribute `name`, given a new reference (NULL: an error already raised). */
static int add(PyObject *m, const char *name, PyObject *value) {
    int rc = value ? PyModule_AddObjectRef(m, name, value) : -1;
    Py_XDECREF(value);
    return rc;
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastloop", "The compiled event loop (see fastloop.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__fastloop(void) {
    S_draw = PyUnicode_InternFromString("draw");
    S_drain = PyUnicode_InternFromString("drain");
    S_failed = PyUnicode_InternFromString("failed");
    S_drop = PyUnicode_InternFromString("drop");
    S_reconnect = PyUnicode_InternFromString("reconnect");
    S_done = PyUnicode_InternFromString("done");
    S_sync = PyUnicode_InternFromString("sync");
    if (!S_draw || !S_drain || !S_failed || !S_drop || !S_reconnect || !S_done || !S_sync) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "INTERFACE", INTERFACE) < 0 || add(m, "LAYOUTS", layouts()) < 0 ||
        add(m, "PROTOCOLS", names(PROTOCOL_NAMES, N_PROTOCOLS)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
