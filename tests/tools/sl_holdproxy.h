/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TCP proxy for protocol-phase tests: it sits between a client (a sink
 * under test) and a real PostgreSQL or MariaDB server on 127.0.0.1, knows
 * just enough of each wire protocol to find message boundaries, and can
 * hold, drop, delay or reset the server's reply to one chosen statement,
 * such as COMMIT PREPARED or XA COMMIT, after the server has carried it
 * out.  It runs as a poll-loop thread of the test (this API) or as the
 * program sl-holdproxy driven through stdin/stdout (sl_holdproxy_main.c).
 * See docs/testing-servers.md.
 *
 * Framing.  PostgreSQL v3: the client's first messages are untyped (int32
 * length, int32 code); an SSLRequest or GSSENCRequest is answered 'N' by
 * the proxy itself (TLS is refused, clients must not require it), a
 * StartupMessage or CancelRequest is forwarded; after that every message
 * is a type byte and an int32 length.  MySQL: packets of a 3-byte length,
 * a sequence byte and the payload; a client packet with sequence 0 is a
 * command, 0x03 is COM_QUERY; a TLS request from the client closes the
 * connection.
 *
 * Rules.  A rule matches client statements: PostgreSQL 'Q' (simple query)
 * or 'P' (Parse) messages whose text contains `match`; MySQL COM_QUERY
 * whose text starts with `match` (ignoring case and leading blanks).
 * Every match counts an attempt.  The action applies to the first `times`
 * matches (0: all) at the reply point: PostgreSQL, the first
 * CommandComplete ('C') whose tag starts with `pg_reply_tag` (any tag when
 * NULL) or the first ErrorResponse ('E') after the match; MySQL, the first
 * server packet after the matched COM_QUERY (OK or ERR).  The server's
 * bytes before the reply point are forwarded.  Where rules overlap, the
 * first armed applicable rule acts; every matching rule counts.
 */
#ifndef SL_HOLDPROXY_H
#define SL_HOLDPROXY_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/sluice.h"

typedef enum sl_proxy_proto {
  SL_PROXY_PG = 1,   /* PostgreSQL frontend/backend protocol v3 */
  SL_PROXY_MYSQL = 2 /* MySQL / MariaDB client/server protocol */
} sl_proxy_proto_t;

typedef enum sl_proxy_action {
  SL_PROXY_PASS = 0, /* count only */
  /* Hold the reply and everything the server sends after it until
   * sl_proxy_release. */
  SL_PROXY_HOLD = 1,
  /* Discard the reply and close both sockets: the client sees a lost
   * connection, the server's work stands. */
  SL_PROXY_DROP = 2,
  /* As DROP, but both sockets are reset (SO_LINGER 0) instead of closed. */
  SL_PROXY_RST = 3,
  /* Forward the reply delay_ms late. */
  SL_PROXY_DELAY = 4
} sl_proxy_action_t;

typedef struct sl_proxy_rule_s {
  const char *match; /* required; copied by sl_proxy_arm */
  sl_proxy_action_t action;
  const char *pg_reply_tag; /* PostgreSQL: see above; copied */
  int delay_ms;             /* SL_PROXY_DELAY */
  int times;                /* matches the action applies to; 0: all */
  /*
   * When the client of a connection on which this rule matched closes,
   * keep the server side open (the server still sees the session: a
   * MariaDB XA branch stays attached to it) until sl_proxy_release of
   * this rule or sl_proxy_stop.  From the match on, the client's goodbye
   * (PostgreSQL Terminate 'X', MySQL COM_QUIT) is not forwarded, so a
   * client that closes politely looks to the server like a killed one.
   */
  bool keep_upstream_open_on_client_close;
} sl_proxy_rule_t;

typedef struct sl_proxy_counts_s {
  uint64_t attempts; /* client statements matched */
  uint64_t held;     /* replies held (HOLD) or delayed (DELAY) */
  uint64_t released; /* held replies let go by sl_proxy_release */
  uint64_t dropped;  /* replies dropped (DROP, RST) */
  uint64_t paused;   /* connections held right now */
} sl_proxy_counts_t;

typedef struct sl_proxy_s sl_proxy_t;

/**
 * @brief Listen on 127.0.0.1:listen_port (0: any free port) and start the
 * poll thread; connections go to 127.0.0.1:upstream_port.
 * @return SL_OK; SL_EINVAL; a negated errno (bind, thread).
 * @thread any.  @ownership the caller stops it with sl_proxy_stop.
 */
int sl_proxy_start(sl_proxy_proto_t proto, int upstream_port,
                   int listen_port, sl_proxy_t **out_proxy,
                   sl_error_t **out_err);

/** @brief The port the proxy listens on.  @thread any */
int sl_proxy_port(const sl_proxy_t *proxy);

/**
 * @brief Add a rule; it applies to connections from now on (and to
 * statements sent later on open ones).
 * @param[out] out_rule the rule's id (0, 1, ... in arming order).
 * @return SL_OK; SL_EINVAL (no match text, bad action, too many rules).
 * @thread any
 */
int sl_proxy_arm(sl_proxy_t *proxy, const sl_proxy_rule_t *rule,
                 int *out_rule, sl_error_t **out_err);

/**
 * @brief Wait until a reply is held by rule (one connection at least).
 * @return SL_OK; -ETIMEDOUT after timeout_ms; SL_EINVAL (no such rule).
 * @thread any but the proxy's.
 */
int sl_proxy_wait_paused(sl_proxy_t *proxy, int rule, int timeout_ms);

/**
 * @brief Deliver every reply held by rule (a connection whose client is
 * gone is closed instead), and close the server side of connections kept
 * open by it.
 * @return the number of held replies released (>= 0); SL_EINVAL.
 * @thread any
 */
int sl_proxy_release(sl_proxy_t *proxy, int rule);

/** @brief Counters of rule.  @return SL_OK; SL_EINVAL.  @thread any */
int sl_proxy_count(sl_proxy_t *proxy, int rule, sl_proxy_counts_t *out);

/** @brief Close every connection and the listener, join the thread,
 * free.  NULL does nothing. */
void sl_proxy_stop(sl_proxy_t *proxy);

/**
 * @brief Parse a rule from text (the program's --rule and "arm" form):
 *   ACTION [times=N] [delay=MS] [tag="TAG"] [keep] match=TEXT
 * ACTION is pass, hold, drop, rst or delay; `keep` sets
 * keep_upstream_open_on_client_close; TEXT is the rest of the line.
 * @param[out] out_rule its strings point into *out_storage (written on
 * success; the caller frees it with sl_free).
 * @return SL_OK; SL_EPARSE with a message naming the bad token.
 */
int sl_proxy_rule_parse(const char *text, sl_proxy_rule_t *out_rule,
                        char **out_storage, sl_error_t **out_err);

#endif
