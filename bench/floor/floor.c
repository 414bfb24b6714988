// floor: the least a load client can do per streamed event when it stamps every event as it
// arrives (bench/client.sh -floor). C, one epoll set, each ready socket read once per wake-up
// into one buffer, a clock read per read, and no parsing beyond finding each answer's end (the
// chunked body's last chunk). Closed loop: N requests at concurrency C, IN words in, OUT tokens
// out, each connection kept alive for its next request. What it costs per output token is what
// the kernel charges any exact reader here (the read, its ACK over loopback, the wake-ups); a
// client cannot go under it without reading several events per read, that is stamping them late.
// Usage: floor PORT C N IN OUT
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { maxConns = 1024 };

static const char end[] = "\r\n0\r\n\r\n"; // the last chunk of a chunked body (no trailers)

struct conn {
	int fd;
	size_t matched; // how much of end the bytes so far end with
};

static void die(const char *what) {
	perror(what);
	exit(1);
}

static void sendAll(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write"); // a request is far smaller than the socket's buffer
		}
		p += w, n -= (size_t)w;
	}
}

// scan advances c's match of end over p; true when an answer ended.
static int scan(struct conn *c, const char *p, size_t n) {
	int ended = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == end[c->matched])
			c->matched++;
		else
			c->matched = p[i] == end[0] ? 1 : 0;
		if (c->matched == sizeof end - 1) {
			ended = 1;
			c->matched = 0;
		}
	}
	return ended;
}

int main(int argc, char **argv) {
	if (argc != 6) {
		fprintf(stderr, "usage: floor PORT C N IN OUT\n");
		return 2;
	}
	int port = atoi(argv[1]), conc = atoi(argv[2]), n = atoi(argv[3]), in = atoi(argv[4]), out = atoi(argv[5]);
	if (port <= 0 || port > 65535 || conc <= 0 || conc > maxConns || n <= 0 || in <= 0 || in > 1000 || out <= 0) {
		fprintf(stderr, "floor: bad arguments (IN at most 1000 words)\n");
		return 2;
	}
	char words[2048] = "w", body[4096], req[8192];
	for (int i = 1; i < in; i++)
		strcat(words, " w");
	int bl = snprintf(body, sizeof body,
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,"
		"\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", words, out);
	int rl = snprintf(req, sizeof req, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", port, bl, body);

	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	static struct conn conns[maxConns];
	int sent = 0, done = 0;
	for (int i = 0; i < conc && sent < n; i++, sent++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
			die("connect");
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		sendAll(fd, req, (size_t)rl);
		fcntl(fd, F_SETFL, O_NONBLOCK);
		conns[i] = (struct conn){.fd = fd};
		struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u32 = (unsigned)i};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
			die("epoll_ctl");
	}
	static char buf[65536];
	struct epoll_event evs[256];
	long reads = 0;
	struct timespec at;
	while (done < n) {
		int k = epoll_wait(ep, evs, 256, -1);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int j = 0; j < k; j++) {
			struct conn *c = &conns[evs[j].data.u32];
			for (;;) {
				ssize_t r = read(c->fd, buf, sizeof buf);
				if (r < 0) {
					if (errno == EINTR)
						continue;
					if (errno == EAGAIN)
						break;
					die("read");
				}
				clock_gettime(CLOCK_REALTIME, &at); // the stamp of the events in this read
				reads++;
				if (r == 0) {
					fprintf(stderr, "floor: the server closed a connection\n");
					return 1;
				}
				if (scan(c, buf, (size_t)r)) {
					done++;
					if (sent < n) {
						sent++;
						sendAll(c->fd, req, (size_t)rl);
					}
				}
				if (r < (ssize_t)sizeof buf)
					break;
			}
		}
	}
	printf("%d requests, %ld reads\n", done, reads);
	return 0;
}
