/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Injection points: a small table of armed points under a mutex.  Reaching a
 * point counts the hit; an armed point fails, kills or pauses on the hit it
 * was armed for.  The table is also filled once from the SL_INJECT
 * environment variable ("name=action[:hit][,...]", action fail|kill|pause,
 * a trailing "+" on the hit makes it sticky).  See inject.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/inject.h"

#define MAX_POINTS 128
#define NAME_LEN 96

typedef struct point_s {
  char name[NAME_LEN];
  sl_inject_action_t action;
  uint32_t hit;      /* act on this hit number */
  bool is_sticky;    /* and on every later one */
  uint32_t n_hits;
  uint32_t n_paused; /* threads waiting at the latch */
  uint64_t release_gen;
} point_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static point_t points[MAX_POINTS]; /* protected by lock */
static int n_points;               /* protected by lock */
static bool env_loaded;            /* protected by lock */

static point_t *find(const char *name, bool create) {
  for (int i = 0; i < n_points; i++)
    if (strcmp(points[i].name, name) == 0) return &points[i];
  if (!create || n_points == MAX_POINTS || strlen(name) >= NAME_LEN)
    return NULL;
  point_t *p = &points[n_points++];
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", name);
  return p;
}

static void load_env_locked(void) {
  if (env_loaded) return;
  env_loaded = true;
  const char *env = getenv("SL_INJECT");
  if (env == NULL || env[0] == '\0') return;
  char *copy = strdup(env);
  if (copy == NULL) return;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (eq == NULL) continue;
    *eq = '\0';
    char *act = eq + 1, *colon = strchr(act, ':');
    uint32_t hit = 1;
    bool is_sticky = false;
    if (colon) {
      *colon = '\0';
      char *end;
      unsigned long h = strtoul(colon + 1, &end, 10);
      if (h > 0) hit = (uint32_t)h;
      if (*end == '+') is_sticky = true;
    }
    sl_inject_action_t a = SL_INJECT_NONE;
    if (strcmp(act, "fail") == 0) a = SL_INJECT_FAIL;
    else if (strcmp(act, "kill") == 0) a = SL_INJECT_KILL;
    else if (strcmp(act, "pause") == 0) a = SL_INJECT_PAUSE;
    point_t *p = find(item, true);
    if (p) {
      p->action = a;
      p->hit = hit;
      p->is_sticky = is_sticky;
    }
  }
  free(copy);
}

int sl__inject(const char *name) {
  pthread_mutex_lock(&lock);
  load_env_locked();
  point_t *p = find(name, true);
  if (p == NULL) {
    pthread_mutex_unlock(&lock);
    return SL_OK;
  }
  uint32_t n = ++p->n_hits;
  bool is_due = p->action != SL_INJECT_NONE &&
                (n == p->hit || (p->is_sticky && n > p->hit));
  if (!is_due) {
    pthread_mutex_unlock(&lock);
    return SL_OK;
  }
  switch (p->action) {
  case SL_INJECT_FAIL:
    pthread_mutex_unlock(&lock);
    sl_log(SL_LOG_DEBUG, "injection point %s: failing", name);
    return SL_EFAILED;
  case SL_INJECT_KILL:
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "sluice: injection point %s: killing the process\n",
            name);
    fflush(stderr);
    kill(getpid(), SIGKILL);
    for (;;) pause();
  case SL_INJECT_PAUSE: {
    /* Said on stderr, so that a test holding a sluice process here
     * (SL_INJECT "point=pause:N") knows when, and can kill it there. */
    fprintf(stderr, "sluice: injection point %s: paused\n", name);
    fflush(stderr);
    uint64_t gen = p->release_gen;
    p->n_paused++;
    pthread_cond_broadcast(&cond);
    while (p->release_gen == gen && p->action == SL_INJECT_PAUSE)
      pthread_cond_wait(&cond, &lock);
    p->n_paused--;
    pthread_mutex_unlock(&lock);
    return SL_OK;
  }
  default:
    pthread_mutex_unlock(&lock);
    return SL_OK;
  }
}

int sl_inject_arm(const char *name, sl_inject_action_t action, uint32_t hit,
                  bool is_sticky) {
  pthread_mutex_lock(&lock);
  load_env_locked();
  point_t *p = find(name, true);
  if (p) {
    p->action = action;
    p->hit = p->n_hits + (hit ? hit : 1);
    p->is_sticky = is_sticky;
  }
  pthread_mutex_unlock(&lock);
  return p ? SL_OK : SL_ENOMEM;
}

void sl_inject_reset(void) {
  pthread_mutex_lock(&lock);
  env_loaded = true; /* a reset also forgets the environment */
  for (int i = 0; i < n_points; i++) {
    points[i].action = SL_INJECT_NONE;
    points[i].n_hits = 0;
    points[i].release_gen++;
  }
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

int sl_inject_wait_paused(const char *name, uint32_t timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&lock);
  int rc = SL_OK;
  for (;;) {
    point_t *p = find(name, true);
    if (p && p->n_paused > 0) break;
    if (pthread_cond_timedwait(&cond, &lock, &ts) == ETIMEDOUT) {
      p = find(name, false);
      rc = p && p->n_paused > 0 ? SL_OK : SL_EAGAIN;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

void sl_inject_release(const char *name) {
  pthread_mutex_lock(&lock);
  point_t *p = find(name, false);
  if (p) {
    p->release_gen++;
    p->action = SL_INJECT_NONE;
  }
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

uint32_t sl_inject_hits(const char *name) {
  pthread_mutex_lock(&lock);
  point_t *p = find(name, false);
  uint32_t n = p ? p->n_hits : 0;
  pthread_mutex_unlock(&lock);
  return n;
}

bool sl_inject_is_enabled(void) {
#ifdef SL_FAULT_INJECTION
  return true;
#else
  return false;
#endif
}
