/*
 * rtolab-lwip-host: the real lwIP (Debian's liblwip, 2.1) as an emulator
 * host.
 *
 * The emulator starts this program with one end of a SOCK_SEQPACKET
 * socket pair (descriptor 3, or --fd N): each message is one IPv4
 * datagram, in either direction. lwIP gets a netif whose output sends on that socket
 * and whose input is fed from it; nothing of the kernel's TCP/IP is
 * involved. One thread runs everything (lwIP's raw API with
 * sys_check_timeouts in the main loop, as NO_SYS ports do): the library
 * is built for an OS (NO_SYS = 0), but its tcpip thread is never started,
 * so the core-locking check has no thread to compare against.
 *
 * Apps run after lwIP has handled each input or timer, never inside
 * lwIP's callbacks, the way a sequential-API application thread acts
 * after the tcpip thread: an ACK lwIP sends at once leaves before the
 * app's answer.
 *
 * Arguments (the emulator writes them; see crates/emu/src/lwip.rs):
 *   --fd N                     the socket (default 3)
 *   --address A.B.C.D/PREFIX   interface address
 *   --gateway A.B.C.D          default route (optional)
 *   --mtu N                    interface MTU (lwIP derives its MSS from it)
 *   --initial-rto-ticks N      initial RTO of every connection, in 500 ms
 *                              ticks (lwIP 2.1 fixes 6 at compile time)
 *   --app NAME:exchange-server:PORT
 *   --app NAME:tcp-sink:PORT
 *   --app NAME:exchange:IP:PORT:REQUEST:RESPONSE:COUNT:START_NS:GAP_NS:SRCPORT:CONNECT_FIRST
 *   --app NAME:tcp-bulk:IP:PORT:BYTES:START_NS:SRCPORT
 * (SRCPORT 0: lwIP picks.) Start times count from the program's start.
 *
 * Output on stdout, one JSON object a line: {"event":"clients_done"} once
 * every client app finished, and on SIGTERM or end of input one
 * {"app":NAME,...} line per app with what it did, then the program exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lwip/init.h"
#include "lwip/ip.h"
#include "lwip/ip4.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"

#define PACKET_FD 3
#define MAX_APPS 16
#define MAX_CONNS 64
#define MAX_DATAGRAM 65535
#define REQUEST_HEADER_LEN 8

/* ---- the byte stream every app sends (rtolab_sim::app::pattern) ---- */

static const char ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static uint8_t pattern_at(uint64_t offset) {
  uint64_t z = offset + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (uint8_t)ALPHABET[z >> 58];
}

/* Byte `offset` of an exchange request: the header (request and response
 * lengths, big-endian) over the pattern. */
static uint8_t request_at(uint64_t offset, uint32_t request, uint32_t response) {
  if (offset < 4) return (uint8_t)(request >> (8 * (3 - offset)));
  if (offset < 8) return (uint8_t)(response >> (8 * (7 - offset)));
  return pattern_at(offset);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* ---- apps ---- */

enum kind { EXCHANGE_SERVER, TCP_SINK, EXCHANGE, TCP_BULK };

struct app {
  char name[64];
  enum kind kind;
  ip4_addr_t peer;
  uint16_t port, source_port;
  uint32_t request, response, count;
  uint64_t bytes; /* tcp-bulk */
  uint64_t start_ns, gap_ns;
  int connect_first;
  /* progress of a client */
  int done, running;
  uint32_t exchanges_done;
  uint64_t next_start_ns;
  /* results */
  uint64_t connections, bytes_sent, bytes_received, bytes_corrupt;
  uint64_t exchanges_completed, exchanges_failed;
  uint64_t latency_min_ns, latency_max_ns, latency_sum_ns, latencies;
  uint64_t completion_ns;
  int has_completion;
  char failure[128];
};

/* One TCP connection of an app; lwIP's callbacks only record events in
 * it, the main loop acts on them. */
struct conn {
  int used;
  struct app *app;
  struct tcp_pcb *pcb;
  uint64_t opened_ns;
  int connected, peer_closed, closed, failed, answered, fin_sent;
  uint64_t to_send, queued;       /* bytes this side must send / has queued */
  uint64_t received;              /* bytes received */
  uint8_t header[REQUEST_HEADER_LEN];
  uint32_t request, response;     /* of the exchange (server: parsed) */
  int header_parsed;
};

static struct app apps[MAX_APPS];
static int n_apps;
static struct conn conns[MAX_CONNS];
static struct netif nif;
static int packet_fd = PACKET_FD;
static volatile sig_atomic_t stop;
static uint64_t t0;
static int initial_rto_ticks;
static int clients_done_said;

static void set_failure(struct app *a, const char *what) {
  if (!a->failure[0]) snprintf(a->failure, sizeof a->failure, "%s", what);
}

static struct conn *conn_new(struct app *a, struct tcp_pcb *pcb) {
  for (int i = 0; i < MAX_CONNS; i++) {
    if (!conns[i].used) {
      memset(&conns[i], 0, sizeof conns[i]);
      conns[i].used = 1;
      conns[i].app = a;
      conns[i].pcb = pcb;
      conns[i].opened_ns = now_ns();
      return &conns[i];
    }
  }
  return NULL;
}

/* lwIP 2.1 sets a new connection's RTO to 3000 ms / TCP_SLOW_INTERVAL in
 * tcp_alloc() and offers no option for it; the pcb's field is public, so
 * a scenario's initial RTO is written there before the first send. */
static void apply_initial_rto(struct tcp_pcb *pcb) {
  if (initial_rto_ticks > 0) {
    /* tcp_alloc() starts both from the same constant: a rebuilt lwIP
     * with another initial RTO changes both. */
    pcb->rto = (s16_t)initial_rto_ticks;
    pcb->sv = (s16_t)initial_rto_ticks;
  }
}

static void record_latency(struct app *a, uint64_t ns) {
  if (a->latencies == 0 || ns < a->latency_min_ns) a->latency_min_ns = ns;
  if (ns > a->latency_max_ns) a->latency_max_ns = ns;
  a->latency_sum_ns += ns;
  a->latencies++;
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err) {
  struct conn *c = arg;
  (void)err;
  if (!c) {
    if (p) pbuf_free(p);
    return ERR_OK;
  }
  if (!p) {
    c->peer_closed = 1;
    return ERR_OK;
  }
  struct app *a = c->app;
  for (struct pbuf *q = p; q; q = q->next) {
    const uint8_t *d = q->payload;
    for (u16_t i = 0; i < q->len; i++) {
      uint64_t at = c->received + i;
      uint8_t expected;
      if (a->kind == EXCHANGE_SERVER) {
        if (at < REQUEST_HEADER_LEN) {
          c->header[at] = d[i];
          continue;
        }
        expected = pattern_at(at);
      } else {
        expected = pattern_at(at);
      }
      if (d[i] != expected) a->bytes_corrupt++;
    }
    c->received += q->len;
  }
  a->bytes_received += p->tot_len;
  tcp_recved(pcb, p->tot_len);
  pbuf_free(p);
  return ERR_OK;
}

static void on_err(void *arg, err_t err) {
  struct conn *c = arg;
  if (!c) return;
  /* lwIP has freed the pcb already. */
  c->pcb = NULL;
  c->failed = 1;
  char what[64];
  snprintf(what, sizeof what, "connection_error(%d)", (int)err);
  set_failure(c->app, what);
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err) {
  struct conn *c = arg;
  (void)pcb;
  if (c) c->connected = (err == ERR_OK);
  return ERR_OK;
}

static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err) {
  struct app *a = arg;
  if (err != ERR_OK || !pcb) return ERR_VAL;
  struct conn *c = conn_new(a, pcb);
  if (!c) {
    tcp_abort(pcb);
    return ERR_ABRT;
  }
  apply_initial_rto(pcb);
  c->connected = 1;
  a->connections++;
  tcp_arg(pcb, c);
  tcp_recv(pcb, on_recv);
  tcp_err(pcb, on_err);
  return ERR_OK;
}

/* Queues as much of the connection's stream as lwIP's buffer takes. */
static void push(struct conn *c) {
  struct app *a = c->app;
  uint8_t buf[1460];
  int queued_any = 0;
  while (c->pcb && c->queued < c->to_send) {
    uint64_t room = tcp_sndbuf(c->pcb);
    if (room == 0 || tcp_sndqueuelen(c->pcb) >= TCP_SND_QUEUELEN) break;
    uint64_t n = c->to_send - c->queued;
    if (n > room) n = room;
    if (n > sizeof buf) n = sizeof buf;
    for (uint64_t i = 0; i < n; i++) {
      uint64_t at = c->queued + i;
      buf[i] = a->kind == EXCHANGE ? request_at(at, c->request, c->response) : pattern_at(at);
    }
    u8_t flags = TCP_WRITE_FLAG_COPY;
    if (c->queued + n < c->to_send) flags |= TCP_WRITE_FLAG_MORE;
    if (tcp_write(c->pcb, buf, (u16_t)n, flags) != ERR_OK) break;
    c->queued += n;
    a->bytes_sent += n;
    queued_any = 1;
  }
  if (queued_any && c->pcb) tcp_output(c->pcb);
}

static void conn_close(struct conn *c) {
  if (c->pcb && !c->fin_sent) {
    /* Send our FIN and keep receiving until the peer's. */
    if (tcp_shutdown(c->pcb, 0, 1) == ERR_OK) c->fin_sent = 1;
  }
}

static void conn_release(struct conn *c) {
  if (c->pcb) {
    tcp_arg(c->pcb, NULL);
    tcp_recv(c->pcb, NULL);
    tcp_err(c->pcb, NULL);
    tcp_sent(c->pcb, NULL);
    if (tcp_close(c->pcb) != ERR_OK) tcp_abort(c->pcb);
    c->pcb = NULL;
  }
  c->used = 0;
}

static void start_client(struct app *a) {
  struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_V4);
  struct conn *c = pcb ? conn_new(a, pcb) : NULL;
  if (!c) {
    set_failure(a, "out_of_memory");
    if (pcb) tcp_abort(pcb);
    a->done = 1;
    return;
  }
  apply_initial_rto(pcb);
  a->running = 1;
  a->connections++;
  if (a->kind == EXCHANGE) {
    c->request = a->request < REQUEST_HEADER_LEN ? REQUEST_HEADER_LEN : a->request;
    c->response = a->response;
  }
  c->to_send = a->kind == EXCHANGE ? c->request : a->bytes;
  tcp_arg(pcb, c);
  tcp_recv(pcb, on_recv);
  tcp_err(pcb, on_err);
  if (a->source_port) tcp_bind(pcb, IP4_ADDR_ANY, a->source_port);
  ip_addr_t peer;
  ip_addr_copy_from_ip4(peer, a->peer);
  if (tcp_connect(pcb, &peer, a->port, on_connected) != ERR_OK) {
    set_failure(a, "connect_failed");
    c->failed = 1;
    return;
  }
  /* An exchange without connect_first writes its request at once: lwIP
   * queues it in SYN_SENT, cut at the MSS it assumes before the peer's
   * SYN-ACK (536 bytes, INITIAL_MSS), and keeps those segments. A bulk
   * sender writes once connected, like a socket program after connect(). */
  if (a->kind == EXCHANGE && !a->connect_first) push(c);
}

static void finish_client_conn(struct conn *c) {
  struct app *a = c->app;
  if (a->kind == EXCHANGE) {
    if (!c->answered) a->exchanges_failed++;
    a->exchanges_done++;
    if (a->exchanges_done >= a->count) a->done = 1;
    a->next_start_ns = now_ns() + a->gap_ns;
  } else {
    if (!c->failed && c->peer_closed) {
      a->completion_ns = now_ns() - c->opened_ns;
      a->has_completion = 1;
    }
    a->done = 1;
  }
  a->running = 0;
  conn_release(c);
}

/* Everything apps do, after lwIP has handled an input or a timer. */
static void step_apps(void) {
  uint64_t now = now_ns();
  for (int i = 0; i < n_apps; i++) {
    struct app *a = &apps[i];
    if ((a->kind == EXCHANGE || a->kind == TCP_BULK) && !a->done && !a->running) {
      uint64_t due = t0 + (a->exchanges_done == 0 ? a->start_ns : 0);
      if (a->exchanges_done > 0) due = a->next_start_ns;
      if (now >= due) start_client(a);
    }
  }
  for (int i = 0; i < MAX_CONNS; i++) {
    struct conn *c = &conns[i];
    if (!c->used) continue;
    struct app *a = c->app;
    if (c->failed) {
      if (a->kind == EXCHANGE || a->kind == TCP_BULK) finish_client_conn(c);
      else conn_release(c);
      continue;
    }
    switch (a->kind) {
    case EXCHANGE:
      if (c->connected) push(c);
      if (!c->answered && c->received >= c->response && c->queued >= c->to_send && c->connected) {
        c->answered = 1;
        a->exchanges_completed++;
        record_latency(a, now_ns() - c->opened_ns);
        conn_close(c);
      }
      if (c->answered && c->peer_closed) finish_client_conn(c);
      else if (c->peer_closed && !c->answered) {
        set_failure(a, "peer_closed_early");
        finish_client_conn(c);
      }
      break;
    case TCP_BULK:
      if (c->connected) push(c);
      /* Close once everything is written, as a socket program's
       * shutdown() after its last write: lwIP puts the FIN on the last
       * queued segment when it can. */
      if (c->connected && c->queued >= c->to_send) conn_close(c);
      if (c->peer_closed) finish_client_conn(c);
      break;
    case EXCHANGE_SERVER:
      if (!c->header_parsed && c->received >= REQUEST_HEADER_LEN) {
        c->header_parsed = 1;
        c->request = ((uint32_t)c->header[0] << 24) | ((uint32_t)c->header[1] << 16) |
                     ((uint32_t)c->header[2] << 8) | c->header[3];
        c->response = ((uint32_t)c->header[4] << 24) | ((uint32_t)c->header[5] << 16) |
                      ((uint32_t)c->header[6] << 8) | c->header[7];
      }
      if (c->header_parsed && !c->answered && c->received >= c->request) {
        c->answered = 1;
        c->to_send = c->response;
        a->exchanges_completed++;
      }
      if (c->answered) push(c);
      if (c->peer_closed) {
        conn_close(c);
        if (c->queued >= c->to_send) conn_release(c);
      }
      break;
    case TCP_SINK:
      if (c->peer_closed) {
        conn_close(c);
        conn_release(c);
      }
      break;
    }
  }
  if (!clients_done_said) {
    int clients = 0, done = 1;
    for (int i = 0; i < n_apps; i++) {
      if (apps[i].kind == EXCHANGE || apps[i].kind == TCP_BULK) {
        clients++;
        done &= apps[i].done;
      }
    }
    if (clients && done) {
      clients_done_said = 1;
      printf("{\"event\":\"clients_done\"}\n");
      fflush(stdout);
    }
  }
}

/* Milliseconds (rounded up) until a waiting client app is due; -1: none. */
static int64_t next_client_start_ms(void) {
  int64_t best = -1;
  uint64_t now = now_ns();
  for (int i = 0; i < n_apps; i++) {
    struct app *a = &apps[i];
    if ((a->kind != EXCHANGE && a->kind != TCP_BULK) || a->done || a->running) continue;
    uint64_t due = a->exchanges_done == 0 ? t0 + a->start_ns : a->next_start_ns;
    int64_t ms = due <= now ? 0 : (int64_t)((due - now + 999999) / 1000000);
    if (best < 0 || ms < best) best = ms;
  }
  return best;
}

/* ---- the netif: IPv4 datagrams over the socket ---- */

static uint8_t out_buf[MAX_DATAGRAM];

static err_t netif_output_ip4(struct netif *netif, struct pbuf *p, const ip4_addr_t *next) {
  (void)netif;
  (void)next;
  u16_t n = pbuf_copy_partial(p, out_buf, p->tot_len, 0);
  if (send(packet_fd, out_buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) return ERR_IF;
  return ERR_OK;
}

static err_t netif_setup(struct netif *netif) {
  netif->name[0] = 'r';
  netif->name[1] = 't';
  netif->output = netif_output_ip4;
  netif->flags = NETIF_FLAG_LINK_UP;
  return ERR_OK;
}

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

/* ---- results ---- */

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

static void report(void) {
  for (int i = 0; i < n_apps; i++) {
    struct app *a = &apps[i];
    int client = a->kind == EXCHANGE || a->kind == TCP_BULK;
    int completed;
    if (a->kind == EXCHANGE) completed = a->exchanges_completed == a->count;
    else if (a->kind == TCP_BULK) completed = a->has_completion && !a->failure[0];
    else completed = !a->failure[0] && a->connections > 0;
    (void)client;
    printf("{\"app\":");
    json_string(a->name);
    printf(",\"completed\":%s,\"connections\":%llu,\"bytes_sent\":%llu,"
           "\"bytes_received\":%llu,\"bytes_corrupt\":%llu,\"exchanges_completed\":%llu,"
           "\"exchanges_failed\":%llu",
           completed ? "true" : "false", (unsigned long long)a->connections,
           (unsigned long long)a->bytes_sent, (unsigned long long)a->bytes_received,
           (unsigned long long)a->bytes_corrupt, (unsigned long long)a->exchanges_completed,
           (unsigned long long)a->exchanges_failed);
    if (a->latencies)
      printf(",\"latency_min_ns\":%llu,\"latency_max_ns\":%llu,\"latency_sum_ns\":%llu,"
             "\"latencies\":%llu",
             (unsigned long long)a->latency_min_ns, (unsigned long long)a->latency_max_ns,
             (unsigned long long)a->latency_sum_ns, (unsigned long long)a->latencies);
    if (a->has_completion) printf(",\"completion_ns\":%llu", (unsigned long long)a->completion_ns);
    if (a->failure[0]) {
      printf(",\"failure\":");
      json_string(a->failure);
    }
    printf("}\n");
  }
  fflush(stdout);
}

/* ---- arguments ---- */

static void usage(const char *what) {
  fprintf(stderr, "rtolab-lwip-host: %s\n", what);
  exit(2);
}

static int parse_app(char *spec) {
  if (n_apps >= MAX_APPS) usage("too many apps");
  struct app *a = &apps[n_apps];
  memset(a, 0, sizeof *a);
  char *fields[16];
  int n = 0;
  for (char *tok = strtok(spec, ":"); tok && n < 16; tok = strtok(NULL, ":")) fields[n++] = tok;
  if (n < 3) usage("--app NAME:KIND:...");
  snprintf(a->name, sizeof a->name, "%s", fields[0]);
  const char *kind = fields[1];
  if (!strcmp(kind, "exchange-server") || !strcmp(kind, "tcp-sink")) {
    a->kind = !strcmp(kind, "tcp-sink") ? TCP_SINK : EXCHANGE_SERVER;
    a->port = (uint16_t)atoi(fields[2]);
    struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_V4);
    if (!pcb || tcp_bind(pcb, IP4_ADDR_ANY, a->port) != ERR_OK) usage("cannot listen");
    pcb = tcp_listen(pcb);
    if (!pcb) usage("cannot listen");
    tcp_arg(pcb, a);
    tcp_accept(pcb, on_accept);
  } else if (!strcmp(kind, "exchange") && n == 11) {
    a->kind = EXCHANGE;
    if (!ip4addr_aton(fields[2], &a->peer)) usage("bad peer address");
    a->port = (uint16_t)atoi(fields[3]);
    a->request = (uint32_t)strtoul(fields[4], NULL, 10);
    a->response = (uint32_t)strtoul(fields[5], NULL, 10);
    a->count = (uint32_t)strtoul(fields[6], NULL, 10);
    a->start_ns = strtoull(fields[7], NULL, 10);
    a->gap_ns = strtoull(fields[8], NULL, 10);
    a->source_port = (uint16_t)atoi(fields[9]);
    a->connect_first = atoi(fields[10]);
  } else if (!strcmp(kind, "tcp-bulk") && n == 7) {
    a->kind = TCP_BULK;
    if (!ip4addr_aton(fields[2], &a->peer)) usage("bad peer address");
    a->port = (uint16_t)atoi(fields[3]);
    a->bytes = strtoull(fields[4], NULL, 10);
    a->start_ns = strtoull(fields[5], NULL, 10);
    a->source_port = (uint16_t)atoi(fields[6]);
    a->count = 1;
  } else {
    usage("unknown app");
  }
  n_apps++;
  return 0;
}

int main(int argc, char **argv) {
  ip4_addr_t addr, mask, gw;
  ip4_addr_set_zero(&addr);
  ip4_addr_set_zero(&mask);
  ip4_addr_set_zero(&gw);
  int mtu = 1500, have_address = 0;
  t0 = now_ns();
  lwip_init();
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value) usage("missing value");
    i++;
    if (!strcmp(arg, "--address")) {
      char text[32];
      snprintf(text, sizeof text, "%s", value);
      char *slash = strchr(text, '/');
      if (!slash) usage("--address A.B.C.D/PREFIX");
      *slash = 0;
      int prefix = atoi(slash + 1);
      if (!ip4addr_aton(text, &addr) || prefix < 0 || prefix > 32) usage("bad --address");
      ip4_addr_set_u32(&mask, prefix ? lwip_htonl(0xffffffffu << (32 - prefix)) : 0);
      have_address = 1;
    } else if (!strcmp(arg, "--fd")) {
      packet_fd = atoi(value);
    } else if (!strcmp(arg, "--gateway")) {
      if (!ip4addr_aton(value, &gw)) usage("bad --gateway");
    } else if (!strcmp(arg, "--mtu")) {
      mtu = atoi(value);
    } else if (!strcmp(arg, "--initial-rto-ticks")) {
      initial_rto_ticks = atoi(value);
    } else if (!strcmp(arg, "--app")) {
      char spec[512];
      snprintf(spec, sizeof spec, "%s", value);
      parse_app(spec);
    } else {
      usage("unknown option");
    }
  }
  if (!have_address) usage("--address is required");
  if (!netif_add(&nif, &addr, &mask, &gw, NULL, netif_setup, ip_input)) usage("netif_add failed");
  nif.mtu = (u16_t)mtu;
  netif_set_default(&nif);
  netif_set_up(&nif);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  static uint8_t in_buf[MAX_DATAGRAM];
  step_apps();
  while (!stop) {
    u32_t sleep_ms = sys_timeouts_sleeptime();
    int timeout = sleep_ms == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? 50 : (int)sleep_ms;
    int64_t until_start = next_client_start_ms();
    if (until_start >= 0 && until_start < timeout) timeout = (int)until_start;
    if (timeout > 50) timeout = 50;
    struct pollfd pfd = {.fd = packet_fd, .events = POLLIN};
    int ready = poll(&pfd, 1, timeout);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) && !(pfd.revents & POLLIN)) break;
    for (int k = 0; ready > 0 && k < 64; k++) {
      ssize_t n = recv(packet_fd, in_buf, sizeof in_buf, MSG_DONTWAIT);
      if (n == 0) {
        stop = 1;
        break;
      }
      if (n < 0) break;
      struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)n, PBUF_RAM);
      if (!p) continue;
      pbuf_take(p, in_buf, (u16_t)n);
      if (nif.input(p, &nif) != ERR_OK) pbuf_free(p);
      step_apps();
    }
    sys_check_timeouts();
    step_apps();
  }
  report();
  return 0;
}
