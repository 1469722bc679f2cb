/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hold proxy: one poll-loop thread forwards bytes between clients and
 * a server on 127.0.0.1, parsing whole messages in both directions so
 * that rules can match client statements and act at the server's reply.
 * See sl_holdproxy.h for the framing and the rules, and
 * docs/testing-servers.md.
 *
 * A connection keeps four buffers: bytes from the client not yet parsed
 * (c_in), parsed bytes for the server (to_s), bytes from the server not yet
 * parsed (s_in) and parsed bytes for the client (to_c).  Holding a reply
 * is a limit on to_c: only the bytes before the reply point may be sent
 * (to_c_limit); the server's later bytes keep arriving into to_c until the
 * buffer bound stops reading.  Release lifts the limit.
 *
 * Thread model: the proxy's thread owns the sockets; every field of the
 * proxy and its connections is protected by mu, which the thread releases
 * only around poll().  Control calls take mu, change state and wake the
 * thread through a pipe; wait_paused sleeps on cond, which the thread
 * signals when a reply is held.
 */
#define _GNU_SOURCE
#include "sl_holdproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RULES 32
#define BUF_HIGH (4u << 20)     /* stop reading a side above this */
#define MSG_MAX (64u << 20)     /* largest message the proxy parses */
#define PG_SSL_REQUEST 80877103
#define PG_GSSENC_REQUEST 80877104
#define PG_CANCEL_REQUEST 80877102
#define MY_COM_QUIT 0x01
#define MY_COM_QUERY 0x03
#define MY_CLIENT_SSL 0x0800

struct buf {
  uint8_t *d;
  size_t len, cap;
};

struct rule {
  sl_proxy_rule_t r; /* strings owned: match, pg_reply_tag */
  uint64_t acted;
  sl_proxy_counts_t counts;
};

struct conn {
  int cfd, sfd;       /* -1 once closed */
  struct buf c_in, to_s, s_in, to_c;
  size_t to_c_limit;  /* bytes of to_c that may be sent */
  bool pg_started;    /* past the untyped start-up messages */
  uint64_t n_client_pkts;
  int pending_rule;   /* matched, acting at the reply point; -1 none */
  int held_rule;      /* holding the reply; -1 none */
  int keep_rule;      /* keep the server side after the client closes */
  int64_t delay_until; /* ms, 0 none */
  bool close_server_when_flushed;
  bool close_client_when_flushed;
  struct conn *next;
};

struct sl_proxy_s {
  /* Immutable after start. */
  sl_proxy_proto_t proto;
  int upstream_port;
  int port;
  int lfd;
  int wake[2];
  pthread_t thread;
  /* Protected by mu. */
  pthread_mutex_t mu;
  pthread_cond_t cond;
  bool is_stopping;
  struct rule rules[MAX_RULES];
  int n_rules;
  struct conn *conns;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Buffers. */

static bool buf_append(struct buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->d, cap);
    if (d == NULL) return false;
    b->d = d;
    b->cap = cap;
  }
  memcpy(b->d + b->len, p, n);
  b->len += n;
  return true;
}

static void buf_consume(struct buf *b, size_t n) {
  memmove(b->d, b->d + n, b->len - n);
  b->len -= n;
}

static void buf_free(struct buf *b) {
  free(b->d);
  b->d = NULL;
  b->len = b->cap = 0;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static void wake(sl_proxy_t *p) {
  char c = 1;
  ssize_t w = write(p->wake[1], &c, 1);
  (void)w;
}

/* ------------------------------------------------------------------ */
/* Connections. */

static void close_fd(int *fd, bool is_reset) {
  if (*fd < 0) return;
  if (is_reset) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  close(*fd);
  *fd = -1;
}

static void conn_unhold(sl_proxy_t *p, struct conn *c) {
  if (c->held_rule >= 0) {
    p->rules[c->held_rule].counts.paused--;
    c->held_rule = -1;
  }
}

static void conn_close_client(sl_proxy_t *p, struct conn *c) {
  close_fd(&c->cfd, false);
  buf_free(&c->c_in);
  buf_free(&c->to_c);
  (void)p;
}

/* Whether the connection has nothing left to do (both sides closed). */
static bool conn_is_dead(const struct conn *c) {
  return c->cfd < 0 && c->sfd < 0;
}

static void conn_free(sl_proxy_t *p, struct conn *c) {
  conn_unhold(p, c);
  close_fd(&c->cfd, false);
  close_fd(&c->sfd, false);
  buf_free(&c->c_in);
  buf_free(&c->to_s);
  buf_free(&c->s_in);
  buf_free(&c->to_c);
  free(c);
}

/* Drop the connection now: both sides closed (reset when is_reset). */
static void conn_kill(sl_proxy_t *p, struct conn *c, bool is_reset) {
  conn_unhold(p, c);
  close_fd(&c->cfd, is_reset);
  close_fd(&c->sfd, is_reset);
  c->pending_rule = -1;
  c->keep_rule = -1;
}

/* The client side closed (EOF, error, or killed client). */
static void on_client_gone(sl_proxy_t *p, struct conn *c) {
  conn_close_client(p, c);
  if (c->held_rule >= 0) return; /* closed on release */
  if (c->keep_rule >= 0) return; /* closed on release */
  c->close_server_when_flushed = true;
}

static void on_server_gone(sl_proxy_t *p, struct conn *c) {
  close_fd(&c->sfd, false);
  buf_free(&c->to_s);
  buf_free(&c->s_in);
  c->close_client_when_flushed = true;
  (void)p;
}

/* ------------------------------------------------------------------ */
/* Matching. */

static bool my_prefix_match(const uint8_t *text, size_t len,
                            const char *prefix) {
  while (len > 0 && (*text == ' ' || *text == '\t' || *text == '\n' ||
                     *text == '\r')) {
    text++;
    len--;
  }
  size_t n = strlen(prefix);
  return n <= len && strncasecmp((const char *)text, prefix, n) == 0;
}

static bool contains(const uint8_t *text, size_t len, const char *needle) {
  return memmem(text, len, needle, strlen(needle)) != NULL;
}

/* A client statement: count attempts, arm the first applicable rule. */
static void on_statement(sl_proxy_t *p, struct conn *c, const uint8_t *text,
                         size_t len) {
  for (int i = 0; i < p->n_rules; i++) {
    struct rule *r = &p->rules[i];
    bool is_match = p->proto == SL_PROXY_PG
                        ? contains(text, len, r->r.match)
                        : my_prefix_match(text, len, r->r.match);
    if (!is_match) continue;
    r->counts.attempts++;
    if (r->r.keep_upstream_open_on_client_close && c->keep_rule < 0)
      c->keep_rule = i;
    if (r->r.action == SL_PROXY_PASS) continue;
    if (r->r.times > 0 && r->acted >= (uint64_t)r->r.times) continue;
    if (c->pending_rule >= 0 || c->held_rule >= 0) continue;
    r->acted++;
    c->pending_rule = i;
  }
}

/* Parse complete client messages from c_in into to_s.  Returns false when
 * the connection must be dropped. */
static bool parse_client(sl_proxy_t *p, struct conn *c) {
  for (;;) {
    uint8_t *d = c->c_in.d;
    size_t avail = c->c_in.len;
    size_t total;
    if (p->proto == SL_PROXY_PG && !c->pg_started) {
      if (avail < 8) return true;
      uint32_t len = be32(d);
      if (len < 8 || len > 10000) {
        fprintf(stderr, "sl_holdproxy: bad PostgreSQL start-up length %u\n",
                len);
        return false;
      }
      if (avail < len) return true;
      uint32_t code = be32(d + 4);
      if (code == PG_SSL_REQUEST || code == PG_GSSENC_REQUEST) {
        /* Refuse TLS and GSS encryption ourselves: the server never
         * sees the request, so its stream stays plain messages. */
        if (!buf_append(&c->to_c, "N", 1)) return false;
        c->to_c_limit = c->to_c.len;
        buf_consume(&c->c_in, len);
        continue;
      }
      c->pg_started = true;
      total = len;
      (void)code; /* StartupMessage or CancelRequest: forwarded */
    } else if (p->proto == SL_PROXY_PG) {
      if (avail < 5) return true;
      uint32_t len = be32(d + 1);
      if (len < 4 || len > MSG_MAX) {
        fprintf(stderr, "sl_holdproxy: bad PostgreSQL message length %u\n",
                len);
        return false;
      }
      total = 1 + (size_t)len;
      if (avail < total) return true;
      const uint8_t *body = d + 5;
      size_t blen = len - 4;
      if (d[0] == 'X' && c->keep_rule >= 0) {
        /* Terminate: swallowed, so the server goes on seeing a client. */
        buf_consume(&c->c_in, total);
        continue;
      }
      if (d[0] == 'Q') {
        on_statement(p, c, body, strnlen((const char *)body, blen));
      } else if (d[0] == 'P') {
        size_t name = strnlen((const char *)body, blen);
        if (name < blen) {
          const uint8_t *q = body + name + 1;
          on_statement(p, c, q, strnlen((const char *)q, blen - name - 1));
        }
      }
    } else {
      if (avail < 4) return true;
      size_t len = (size_t)d[0] | (size_t)d[1] << 8 | (size_t)d[2] << 16;
      total = 4 + len;
      if (avail < total) return true;
      uint8_t seq = d[3];
      if (c->n_client_pkts == 0 && len == 32 &&
          ((uint32_t)d[4] | (uint32_t)d[5] << 8) & MY_CLIENT_SSL) {
        fprintf(stderr, "sl_holdproxy: the client asked for TLS; connect "
                        "without it (the proxy cannot read TLS)\n");
        return false;
      }
      c->n_client_pkts++;
      if (seq == 0 && len == 1 && d[4] == MY_COM_QUIT && c->keep_rule >= 0) {
        /* COM_QUIT: swallowed, so the server goes on seeing a client. */
        buf_consume(&c->c_in, total);
        continue;
      }
      if (seq == 0 && len >= 1 && d[4] == MY_COM_QUERY)
        on_statement(p, c, d + 5, len - 1);
    }
    if (!buf_append(&c->to_s, d, total)) return false;
    buf_consume(&c->c_in, total);
  }
}

/* Whether a server message is the reply point of the pending rule. */
static bool is_reply_point(sl_proxy_t *p, struct conn *c, const uint8_t *m,
                           size_t total) {
  if (p->proto == SL_PROXY_MYSQL) return true;
  if (m[0] == 'E') return true;
  if (m[0] != 'C') return false;
  const char *tag = p->rules[c->pending_rule].r.pg_reply_tag;
  if (tag == NULL) return true;
  size_t n = strlen(tag);
  return total - 5 >= n && memcmp(m + 5, tag, n) == 0;
}

/* Parse complete server messages from s_in into to_c, acting at the reply
 * point.  Returns false when the connection was dropped by a rule. */
static bool parse_server(sl_proxy_t *p, struct conn *c) {
  for (;;) {
    uint8_t *d = c->s_in.d;
    size_t avail = c->s_in.len;
    size_t total;
    if (p->proto == SL_PROXY_PG) {
      if (avail < 5) return true;
      uint32_t len = be32(d + 1);
      if (len < 4 || len > MSG_MAX) {
        fprintf(stderr, "sl_holdproxy: bad server message length %u\n", len);
        conn_kill(p, c, false);
        return false;
      }
      total = 1 + (size_t)len;
    } else {
      if (avail < 4) return true;
      total = 4 + ((size_t)d[0] | (size_t)d[1] << 8 | (size_t)d[2] << 16);
    }
    if (avail < total) return true;
    if (c->pending_rule >= 0 && is_reply_point(p, c, d, total)) {
      int ri = c->pending_rule;
      struct rule *r = &p->rules[ri];
      c->pending_rule = -1;
      switch (r->r.action) {
      case SL_PROXY_HOLD:
        c->held_rule = ri;
        r->counts.held++;
        r->counts.paused++;
        c->to_c_limit = c->to_c.len;
        pthread_cond_broadcast(&p->cond);
        break;
      case SL_PROXY_DELAY:
        r->counts.held++;
        c->to_c_limit = c->to_c.len;
        c->delay_until = now_ms() + (r->r.delay_ms > 0 ? r->r.delay_ms : 0);
        break;
      case SL_PROXY_DROP:
      case SL_PROXY_RST:
        r->counts.dropped++;
        conn_kill(p, c, r->r.action == SL_PROXY_RST);
        return false;
      case SL_PROXY_PASS:
        break;
      }
    }
    if (!buf_append(&c->to_c, d, total)) {
      conn_kill(p, c, false);
      return false;
    }
    if (c->held_rule < 0 && c->delay_until == 0) c->to_c_limit = c->to_c.len;
    buf_consume(&c->s_in, total);
  }
}

/* ------------------------------------------------------------------ */
/* The loop. */

static int connect_upstream(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

static void on_accept(sl_proxy_t *p) {
  int cfd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (cfd < 0) return;
  int sfd = connect_upstream(p->upstream_port);
  if (sfd < 0) {
    close(cfd); /* the client sees the server as unreachable */
    return;
  }
  int one = 1;
  setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct conn *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    close(cfd);
    close(sfd);
    return;
  }
  c->cfd = cfd;
  c->sfd = sfd;
  c->pending_rule = c->held_rule = c->keep_rule = -1;
  c->next = p->conns;
  p->conns = c;
}

/* Read what is there from fd into b; false on EOF or error. */
static bool read_into(int fd, struct buf *b) {
  uint8_t tmp[65536];
  for (;;) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n > 0) {
      if (!buf_append(b, tmp, (size_t)n)) return false;
      if ((size_t)n < sizeof(tmp)) return true;
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

/* Write up to limit bytes of b to fd; false on error. */
static bool write_from(int fd, struct buf *b, size_t *limit) {
  while (*limit > 0) {
    ssize_t n = send(fd, b->d, *limit, MSG_NOSIGNAL);
    if (n > 0) {
      buf_consume(b, (size_t)n);
      *limit -= (size_t)n;
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                     errno == EINTR);
  }
  return true;
}

static void service(sl_proxy_t *p, struct conn *c, short cev, short sev) {
  if (c->cfd >= 0 && (cev & (POLLIN | POLLHUP | POLLERR))) {
    if (!read_into(c->cfd, &c->c_in)) {
      /* Forward what was complete, then act on the close. */
      if (!parse_client(p, c)) {
        conn_kill(p, c, false);
        return;
      }
      on_client_gone(p, c);
    } else if (!parse_client(p, c)) {
      conn_kill(p, c, false);
      return;
    }
  }
  if (c->sfd >= 0 && (sev & (POLLIN | POLLHUP | POLLERR))) {
    bool is_open = read_into(c->sfd, &c->s_in);
    if (c->cfd < 0 && c->held_rule < 0) {
      buf_free(&c->s_in); /* kept-open upstream: nobody to tell */
    } else if (!parse_server(p, c)) {
      return;
    }
    if (!is_open) on_server_gone(p, c);
  }
  if (c->sfd >= 0 && c->to_s.len > 0) {
    size_t limit = c->to_s.len;
    if (!write_from(c->sfd, &c->to_s, &limit)) on_server_gone(p, c);
  }
  if (c->cfd >= 0 && c->to_c_limit > 0) {
    if (!write_from(c->cfd, &c->to_c, &c->to_c_limit)) on_client_gone(p, c);
  }
  if (c->close_server_when_flushed && c->to_s.len == 0)
    close_fd(&c->sfd, false);
  if (c->close_client_when_flushed && c->held_rule < 0 &&
      c->delay_until == 0 && c->to_c.len == 0)
    close_fd(&c->cfd, false);
}

static void *loop_main(void *arg) {
  sl_proxy_t *p = arg;
  struct pollfd *pfd = NULL;
  struct conn **who = NULL;
  size_t cap = 0;
  pthread_mutex_lock(&p->mu);
  while (!p->is_stopping) {
    /* Reap finished connections and expired delays. */
    int64_t now = now_ms();
    int timeout = -1;
    size_t n_conns = 0;
    for (struct conn **cp = &p->conns; *cp != NULL;) {
      struct conn *c = *cp;
      if (c->delay_until != 0 && now >= c->delay_until) {
        c->delay_until = 0;
        c->to_c_limit = c->to_c.len;
      }
      if (c->delay_until != 0) {
        int left = (int)(c->delay_until - now);
        if (timeout < 0 || left < timeout) timeout = left;
      }
      if (conn_is_dead(c)) {
        *cp = c->next;
        conn_free(p, c);
        continue;
      }
      n_conns++;
      cp = &c->next;
    }
    size_t need = 2 + 2 * n_conns;
    if (need > cap) {
      struct pollfd *np = realloc(pfd, need * sizeof(*pfd));
      struct conn **nw = np ? realloc(who, need * sizeof(*who)) : NULL;
      if (np) pfd = np;
      if (nw) who = nw;
      if (np == NULL || nw == NULL) {
        fprintf(stderr, "sl_holdproxy: out of memory\n");
        break;
      }
      cap = need;
    }
    size_t n = 0;
    pfd[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
    for (struct conn *c = p->conns; c != NULL; c = c->next) {
      short cev = 0, sev = 0;
      if (c->cfd >= 0 && c->to_s.len < BUF_HIGH) cev |= POLLIN;
      if (c->cfd >= 0 && c->to_c_limit > 0) cev |= POLLOUT;
      if (c->sfd >= 0 && c->to_c.len < BUF_HIGH) sev |= POLLIN;
      if (c->sfd >= 0 && c->to_s.len > 0) sev |= POLLOUT;
      who[n] = c;
      pfd[n++] = (struct pollfd){.fd = c->cfd, .events = cev};
      who[n] = c;
      pfd[n++] = (struct pollfd){.fd = c->sfd, .events = sev};
    }
    pthread_mutex_unlock(&p->mu);
    int r = poll(pfd, n, timeout);
    pthread_mutex_lock(&p->mu);
    if (r < 0 && errno != EINTR) {
      fprintf(stderr, "sl_holdproxy: poll: %s\n", strerror(errno));
      break;
    }
    if (r <= 0) continue;
    if (pfd[0].revents) {
      char tmp[64];
      while (read(p->wake[0], tmp, sizeof(tmp)) > 0) {
      }
    }
    if (pfd[1].revents & POLLIN) on_accept(p);
    for (size_t i = 2; i < n; i += 2) {
      struct conn *c = who[i];
      /* A control call may have closed a side while we polled. */
      short cev = c->cfd == pfd[i].fd ? pfd[i].revents : 0;
      short sev = c->sfd == pfd[i + 1].fd ? pfd[i + 1].revents : 0;
      if (cev || sev) service(p, c, cev, sev);
    }
  }
  pthread_mutex_unlock(&p->mu);
  free(pfd);
  free(who);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Control API. */

int sl_proxy_start(sl_proxy_proto_t proto, int upstream_port,
                   int listen_port, sl_proxy_t **out_proxy,
                   sl_error_t **out_err) {
  if (proto != SL_PROXY_PG && proto != SL_PROXY_MYSQL)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_proxy_start: protocol must be SL_PROXY_PG or "
                        "SL_PROXY_MYSQL");
  if (upstream_port <= 0 || upstream_port > 65535 || listen_port < 0 ||
      listen_port > 65535)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_proxy_start: port out of range (upstream %d, "
                        "listen %d)", upstream_port, listen_port);
  sl_proxy_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  p->proto = proto;
  p->upstream_port = upstream_port;
  p->lfd = -1;
  p->wake[0] = p->wake[1] = -1;
  int rc;
  p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p->lfd < 0) goto fail_errno;
  int one = 1;
  setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)listen_port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
  socklen_t slen = sizeof(sa);
  if (bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      listen(p->lfd, 64) != 0 ||
      getsockname(p->lfd, (struct sockaddr *)&sa, &slen) != 0)
    goto fail_errno;
  p->port = ntohs(sa.sin_port);
  if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) goto fail_errno;
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  rc = pthread_create(&p->thread, NULL, loop_main, p);
  if (rc != 0) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    errno = rc;
    goto fail_errno;
  }
  *out_proxy = p;
  return SL_OK;
fail_errno:
  rc = sl_error_set(out_err, -errno,
                    "sl_proxy_start: 127.0.0.1:%d: %s", listen_port,
                    strerror(errno));
  if (p->lfd >= 0) close(p->lfd);
  if (p->wake[0] >= 0) close(p->wake[0]);
  if (p->wake[1] >= 0) close(p->wake[1]);
  free(p);
  return rc;
}

int sl_proxy_port(const sl_proxy_t *proxy) { return proxy->port; }

int sl_proxy_arm(sl_proxy_t *p, const sl_proxy_rule_t *rule, int *out_rule,
                 sl_error_t **out_err) {
  if (rule == NULL || rule->match == NULL || rule->match[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_proxy_arm: the rule needs match text");
  if (rule->action < SL_PROXY_PASS || rule->action > SL_PROXY_DELAY)
    return sl_error_set(out_err, SL_EINVAL, "sl_proxy_arm: action %d",
                        (int)rule->action);
  if (rule->times < 0 || rule->delay_ms < 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_proxy_arm: negative times or delay_ms");
  char *match = strdup(rule->match);
  char *tag = rule->pg_reply_tag ? strdup(rule->pg_reply_tag) : NULL;
  if (match == NULL || (rule->pg_reply_tag && tag == NULL)) {
    free(match);
    free(tag);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  pthread_mutex_lock(&p->mu);
  if (p->n_rules == MAX_RULES) {
    pthread_mutex_unlock(&p->mu);
    free(match);
    free(tag);
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_proxy_arm: at most %d rules", MAX_RULES);
  }
  int id = p->n_rules++;
  struct rule *r = &p->rules[id];
  memset(r, 0, sizeof(*r));
  r->r = *rule;
  r->r.match = match;
  r->r.pg_reply_tag = tag;
  pthread_mutex_unlock(&p->mu);
  *out_rule = id;
  return SL_OK;
}

int sl_proxy_wait_paused(sl_proxy_t *p, int rule, int timeout_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->mu);
  if (rule < 0 || rule >= p->n_rules) {
    pthread_mutex_unlock(&p->mu);
    return SL_EINVAL;
  }
  int rc = SL_OK;
  while (p->rules[rule].counts.paused == 0) {
    int e = pthread_cond_timedwait(&p->cond, &p->mu, &dl);
    if (e == ETIMEDOUT && p->rules[rule].counts.paused == 0) {
      rc = -ETIMEDOUT;
      break;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int sl_proxy_release(sl_proxy_t *p, int rule) {
  pthread_mutex_lock(&p->mu);
  if (rule < 0 || rule >= p->n_rules) {
    pthread_mutex_unlock(&p->mu);
    return SL_EINVAL;
  }
  int n = 0;
  for (struct conn *c = p->conns; c != NULL; c = c->next) {
    if (c->held_rule == rule) {
      conn_unhold(p, c);
      p->rules[rule].counts.released++;
      n++;
      c->to_c_limit = c->to_c.len;
      if (c->cfd < 0) close_fd(&c->sfd, false); /* its client died */
    }
    if (c->keep_rule == rule) {
      c->keep_rule = -1;
      if (c->cfd < 0) close_fd(&c->sfd, false);
    }
  }
  wake(p);
  pthread_mutex_unlock(&p->mu);
  return n;
}

int sl_proxy_count(sl_proxy_t *p, int rule, sl_proxy_counts_t *out) {
  pthread_mutex_lock(&p->mu);
  if (rule < 0 || rule >= p->n_rules) {
    pthread_mutex_unlock(&p->mu);
    return SL_EINVAL;
  }
  *out = p->rules[rule].counts;
  pthread_mutex_unlock(&p->mu);
  return SL_OK;
}

void sl_proxy_stop(sl_proxy_t *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->is_stopping = true;
  wake(p);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  while (p->conns != NULL) {
    struct conn *c = p->conns;
    p->conns = c->next;
    conn_free(p, c);
  }
  for (int i = 0; i < p->n_rules; i++) {
    free((char *)p->rules[i].r.match);
    free((char *)p->rules[i].r.pg_reply_tag);
  }
  close(p->lfd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cond);
  free(p);
}

/* ------------------------------------------------------------------ */
/* Rule text. */

static bool parse_uint(const char *s, size_t n, int *out) {
  if (n == 0 || n > 9) return false;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

int sl_proxy_rule_parse(const char *text, sl_proxy_rule_t *out_rule,
                        char **out_storage, sl_error_t **out_err) {
  sl_proxy_rule_t r;
  memset(&r, 0, sizeof(r));
  const char *m = strstr(text, "match=");
  if (m == NULL || (m != text && m[-1] != ' '))
    return sl_error_set(out_err, SL_EPARSE,
                        "rule '%s': no match=TEXT at the end", text);
  if (m[6] == '\0')
    return sl_error_set(out_err, SL_EPARSE, "rule '%s': empty match text",
                        text);
  /* storage: match text, NUL, tag text, NUL */
  size_t tlen = strlen(text);
  char *st = sl_malloc(tlen + 2);
  if (st == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  memcpy(st, m + 6, strlen(m + 6) + 1);
  char *tag_store = st + strlen(st) + 1;
  tag_store[0] = '\0';
  r.match = st;
  const char *s = text;
  bool has_action = false;
  int rc = SL_OK;
  while (s < m) {
    while (s < m && *s == ' ') s++;
    if (s >= m) break;
    const char *e = s;
    if (strncmp(s, "tag=\"", 5) == 0) {
      const char *q = memchr(s + 5, '"', (size_t)(m - s - 5));
      if (q == NULL) {
        rc = sl_error_set(out_err, SL_EPARSE,
                          "rule '%s': tag=\" without a closing quote", text);
        goto fail;
      }
      memcpy(tag_store, s + 5, (size_t)(q - s - 5));
      tag_store[q - s - 5] = '\0';
      r.pg_reply_tag = tag_store;
      s = q + 1;
      continue;
    }
    while (e < m && *e != ' ') e++;
    size_t n = (size_t)(e - s);
    if (!has_action) {
      static const struct {
        const char *name;
        sl_proxy_action_t action;
      } acts[] = {{"pass", SL_PROXY_PASS}, {"hold", SL_PROXY_HOLD},
                  {"drop", SL_PROXY_DROP}, {"rst", SL_PROXY_RST},
                  {"delay", SL_PROXY_DELAY}};
      for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
        if (strlen(acts[i].name) == n && strncmp(s, acts[i].name, n) == 0) {
          r.action = acts[i].action;
          has_action = true;
        }
      }
      if (!has_action) {
        rc = sl_error_set(out_err, SL_EPARSE,
                          "rule '%s': unknown action '%.*s' (pass, hold, "
                          "drop, rst or delay)", text, (int)n, s);
        goto fail;
      }
    } else if (n > 6 && strncmp(s, "times=", 6) == 0 &&
               parse_uint(s + 6, n - 6, &r.times)) {
    } else if (n > 6 && strncmp(s, "delay=", 6) == 0 &&
               parse_uint(s + 6, n - 6, &r.delay_ms)) {
    } else if (n == 4 && strncmp(s, "keep", 4) == 0) {
      r.keep_upstream_open_on_client_close = true;
    } else {
      rc = sl_error_set(out_err, SL_EPARSE,
                        "rule '%s': unknown option '%.*s' (times=N, "
                        "delay=MS, tag=\"TAG\", keep)", text, (int)n, s);
      goto fail;
    }
    s = e;
  }
  if (!has_action) {
    rc = sl_error_set(out_err, SL_EPARSE,
                      "rule '%s': no action before match=", text);
    goto fail;
  }
  *out_rule = r;
  *out_storage = st;
  return SL_OK;
fail:
  sl_free(st);
  return rc;
}
