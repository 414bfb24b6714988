//go:build linux

package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring receive path of the event loop (issue 31). Each connection gets one multishot
// recv (IORING_OP_RECV with IORING_RECV_MULTISHOT, its buffers chosen by the kernel from a ring of
// provided buffers), armed at its first request and kept across kept-alive requests. The loop
// goroutine parks on the ring's descriptor in Go's netpoller (an io_uring fd polls readable while
// its completion queue holds entries, and wakes its pollers when it posts one: io_uring_poll and
// io_poll_wq_wake in io_uring/io_uring.c), then takes every completion from the shared queue with
// no system call, stamps it, parses its bytes and gives the buffer back. A read costs no syscall
// of ours: the kernel runs the receive as task work of the thread that armed it (notify_method
// TWA_SIGNAL, io_uring_create in io_uring/io_uring.c). That thread is woken for it, in a Go process
// most often asleep, and that second wake-up per completion costs more CPU than the read saves
// (docs/benchmarks.md, "The io_uring reader"): epoll stays the default.
//
// The ABI below (struct layouts, opcodes, flags and offsets) is from include/uapi/linux/io_uring.h
// as liburing ships it, axboe/liburing src/include/liburing/io_uring.h at
// 364452f80f202373158f4452c385c961671f4666; the memory ordering of the ring indexes follows the
// comment at the top of io_uring/io_uring.c (acquire loads of the tails the kernel writes,
// release stores of the indexes we write).

// syscall numbers (the same on every architecture since 5.1: the generic table)
const (
	sysIOUringSetup    = 425
	sysIOUringEnter    = 426
	sysIOUringRegister = 427
)

const (
	iouSetupCQSize = 1 << 3 // IORING_SETUP_CQSIZE
	iouSetupClamp  = 1 << 4 // IORING_SETUP_CLAMP

	iouFeatSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	iouFeatNoDrop     = 1 << 1 // IORING_FEAT_NODROP

	iouOffSQRing = 0x0        // IORING_OFF_SQ_RING
	iouOffSQEs   = 0x10000000 // IORING_OFF_SQES

	iouOpAsyncCancel = 14 // IORING_OP_ASYNC_CANCEL
	iouOpRecv        = 27 // IORING_OP_RECV

	iosqeBufferSelect = 1 << 5 // IOSQE_BUFFER_SELECT
	iouRecvMultishot  = 1 << 1 // IORING_RECV_MULTISHOT (sqe->ioprio)

	iouCQEFBuffer      = 1 << 0 // IORING_CQE_F_BUFFER
	iouCQEFMore        = 1 << 1 // IORING_CQE_F_MORE
	iouCQEBufferShift  = 16     // IORING_CQE_BUFFER_SHIFT
	iouSQCQOverflow    = 1 << 1 // IORING_SQ_CQ_OVERFLOW
	iouEnterGetEvents  = 1 << 0 // IORING_ENTER_GETEVENTS
	iouRegisterPbufRng = 22     // IORING_REGISTER_PBUF_RING
	iouUnregisterPbuf  = 23     // IORING_UNREGISTER_PBUF_RING
)

// the ring's sizes: 256 submission slots (an arm or a cancel each), 8192 completions (more than
// the buffers, so data never overflows it), 256 buffers of 16 KiB (4 MiB, touched a page or so
// each: an event is a few hundred bytes)
const (
	uringSQEntries = 256
	uringCQEntries = 8192
	uringBufs      = 256
	uringBufSize   = 16 << 10
	uringBufGroup  = 0
)

// struct io_sqring_offsets
type iouSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// struct io_cqring_offsets
type iouCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// struct io_uring_params (120 bytes)
type iouParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  iouSQOffsets
	cqOff                                                                  iouCQOffsets
}

// struct io_uring_sqe (64 bytes), the fields this file uses named
type iouSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32 // msg_flags, cancel_flags, ...
	userData    uint64
	bufGroup    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad2        uint64
}

// struct io_uring_cqe (16 bytes)
type iouCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// struct io_uring_buf (16 bytes); the ring's tail overlays bufs[0].resv
type iouBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// struct io_uring_buf_reg
type iouBufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [3]uint64
}

// uring is one io_uring instance with its provided buffers.
type uring struct {
	fd   int
	file *os.File // non-blocking, in Go's netpoller
	rc   syscall.RawConn

	ringMem, sqeMem, brMem, bufMem []byte // the mappings, unmapped by close

	// submission queue, under mu (the kernel only reads it)
	mu      sync.Mutex
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqes    []iouSQE
	tail    uint32 // our tail, published on each queue
	sqFlags *uint32

	// completion queue, only the loop goroutine's
	cqHead *uint32
	cqTail *uint32
	cqMask uint32
	cqes   []iouCQE

	// provided buffers, only the loop goroutine's (after setup)
	bufs     []iouBuf
	brTail   uint16
	brWord   *uint32 // the 4 bytes at offset 12: bufs[0].bid and the ring's tail
	bid0     uint16  // what bufs[0].bid holds
	bufBase  uintptr
	unmapped bool
}

// ringConn is a connection on the ring, under the loop's mu.
type ringConn struct {
	fd    int
	id    uint64      // its recv's user_data
	s     *loopStream // the request it carries; nil between requests
	sid   uint64      // s.id when attached
	armed bool        // a recv is in flight (its last completion had IORING_CQE_F_MORE)
	dead  bool        // its recv ended (the peer's close, an error, bytes nobody asked for)
}

func iouSetup(entries uint32, p *iouParams) (int, error) {
	fd, _, e := unix.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func iouRegister(fd int, op uintptr, arg unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(sysIOUringRegister, uintptr(fd), op, uintptr(arg), n, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// newUring sets up a ring with its provided buffers and checks that multishot receives with
// buffer selection work on this kernel (older ones have neither); any failure means epoll.
func newUring() (r *uring, err error) {
	p := iouParams{flags: iouSetupCQSize | iouSetupClamp, cqEntries: uringCQEntries}
	fd, err := iouSetup(uringSQEntries, &p)
	if err != nil {
		return nil, fmt.Errorf("io_uring: cannot set up a ring: %w", err)
	}
	r = &uring{fd: fd}
	defer func() {
		if err == nil {
			return
		}
		r.unmap()
		if r.file != nil {
			r.file.Close()
		} else {
			unix.Close(fd)
		}
	}()
	if p.features&iouFeatSingleMmap == 0 || p.features&iouFeatNoDrop == 0 {
		return nil, errors.New("io_uring: the kernel is too old (no single mmap or no CQ overflow list)")
	}
	size := max(int(p.sqOff.array)+int(p.sqEntries)*4, int(p.cqOff.cqes)+int(p.cqEntries)*int(unsafe.Sizeof(iouCQE{})))
	if r.ringMem, err = unix.Mmap(fd, iouOffSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("io_uring: cannot map the rings: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(fd, iouOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(iouSQE{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("io_uring: cannot map the submission entries: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.ringMem[off]) }
	r.sqHead, r.sqTail, r.sqFlags = (*uint32)(at(p.sqOff.head)), (*uint32)(at(p.sqOff.tail)), (*uint32)(at(p.sqOff.flags))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqes = unsafe.Slice((*iouSQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	// the SQ's index array maps slot i to entry i once and for all
	array := unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	r.cqHead, r.cqTail = (*uint32)(at(p.cqOff.head)), (*uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*iouCQE)(at(p.cqOff.cqes)), p.cqEntries)

	// the buffer ring (page-aligned, as the kernel requires) and the buffers
	if r.brMem, err = unix.Mmap(-1, 0, uringBufs*int(unsafe.Sizeof(iouBuf{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return nil, fmt.Errorf("io_uring: cannot map the buffer ring: %w", err)
	}
	if r.bufMem, err = unix.Mmap(-1, 0, uringBufs*uringBufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return nil, fmt.Errorf("io_uring: cannot map the buffers: %w", err)
	}
	r.bufs = unsafe.Slice((*iouBuf)(unsafe.Pointer(&r.brMem[0])), uringBufs)
	r.brWord = (*uint32)(unsafe.Pointer(&r.brMem[12]))
	r.bufBase = uintptr(unsafe.Pointer(&r.bufMem[0]))
	reg := iouBufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&r.brMem[0]))), ringEntries: uringBufs, bgid: uringBufGroup}
	if err := iouRegister(fd, iouRegisterPbufRng, unsafe.Pointer(&reg), 1); err != nil {
		return nil, fmt.Errorf("io_uring: cannot register the buffer ring: %w", err)
	}
	for i := range uringBufs {
		r.putBuf(uint16(i))
	}
	r.publishBufs()
	if err := r.probe(); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("io_uring: cannot make the ring non-blocking: %w", err)
	}
	r.file = os.NewFile(uintptr(fd), "io_uring") // non-blocking: os registers it with the netpoller
	if r.rc, err = r.file.SyscallConn(); err != nil {
		return nil, fmt.Errorf("io_uring: cannot wrap the ring: %w", err)
	}
	return r, nil
}

// probe arms a multishot recv on a socket pair, sends it a byte and closes the other end: a
// kernel that takes the request answers the byte in a buffer with more to come, then the end.
func (r *uring) probe() error {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("io_uring: cannot make the probe's sockets: %w", err)
	}
	defer unix.Close(sp[0])
	if _, err := unix.Write(sp[1], []byte{'x'}); err != nil {
		unix.Close(sp[1])
		return fmt.Errorf("io_uring: cannot write the probe's byte: %w", err)
	}
	r.mu.Lock()
	r.queueRecv(sp[0], 1)
	err = r.enterLocked()
	r.mu.Unlock()
	unix.Close(sp[1]) // the recv's end after the byte
	if err != nil {
		return fmt.Errorf("io_uring: cannot submit the probe: %w", err)
	}
	var got []iouCQE
	for len(got) < 2 {
		c, ok := r.nextCQE()
		if !ok {
			if err := r.enter(0, 1, iouEnterGetEvents); err != nil {
				return fmt.Errorf("io_uring: cannot wait for the probe: %w", err)
			}
			continue
		}
		got = append(got, c)
		if c.flags&iouCQEFBuffer != 0 {
			r.putBuf(uint16(c.flags >> iouCQEBufferShift))
			r.publishBufs()
		}
		if c.flags&iouCQEFMore == 0 {
			break
		}
	}
	if len(got) < 2 || got[0].res != 1 || got[0].flags&(iouCQEFBuffer|iouCQEFMore) != iouCQEFBuffer|iouCQEFMore || got[1].res != 0 {
		return fmt.Errorf("io_uring: no multishot recv with provided buffers (probe: %+v)", got)
	}
	return nil
}

// nextCQE takes the next completion, if any.
func (r *uring) nextCQE() (iouCQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return iouCQE{}, false
	}
	c := r.cqes[head&r.cqMask]
	atomic.StoreUint32(r.cqHead, head+1)
	return c, true
}

// enter is io_uring_enter(2) for a wait (min > 0) or a flush of the overflow list.
func (r *uring) enter(n, min, flags uint32) error {
	for {
		_, _, e := unix.Syscall6(sysIOUringEnter, uintptr(r.fd), uintptr(n), uintptr(min), uintptr(flags), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// enterLocked submits what is queued (mu held): every entry between the kernel's head and our
// tail, so that an entry a failed call left behind goes with the next. It does not wait (raw for
// rawRead's reason).
func (r *uring) enterLocked() error {
	for {
		n := r.tail - atomic.LoadUint32(r.sqHead)
		if n == 0 {
			return nil
		}
		_, _, e := unix.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(n), 0, 0, 0, 0)
		switch {
		case e == unix.EINTR:
		case e != 0:
			return e // EAGAIN, EBUSY: the kernel is short of memory, or its CQ overflows
		}
	}
}

// submit sends what is queued.
func (r *uring) submit() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enterLocked()
}

// sqe returns the next free submission entry, zeroed (mu held): when the queue is full, what it
// holds is submitted first (a failed submission is tried again: an entry is never written over
// before the kernel took it).
func (r *uring) sqe() *iouSQE {
	for r.tail-atomic.LoadUint32(r.sqHead) > r.sqMask {
		if err := r.enterLocked(); err != nil {
			runtime.Gosched()
		}
	}
	e := &r.sqes[r.tail&r.sqMask]
	*e = iouSQE{}
	return e
}

// push publishes the entry sqe returned.
func (r *uring) push() {
	r.tail++
	atomic.StoreUint32(r.sqTail, r.tail)
}

// queueRecv queues a multishot recv on fd (mu held).
func (r *uring) queueRecv(fd int, id uint64) {
	e := r.sqe()
	e.opcode, e.flags, e.ioprio, e.fd = iouOpRecv, iosqeBufferSelect, iouRecvMultishot, int32(fd)
	e.bufGroup, e.userData = uringBufGroup, id
	r.push()
}

// queueCancel queues the cancel of the request id (mu held); its own completion carries 0.
func (r *uring) queueCancel(id uint64) {
	e := r.sqe()
	e.opcode, e.fd, e.addr = iouOpAsyncCancel, -1, id
	r.push()
}

// buf is the provided buffer bid.
func (r *uring) buf(bid uint16, n int) []byte {
	return r.bufMem[int(bid)*uringBufSize : int(bid)*uringBufSize+n]
}

// putBuf gives buffer bid back to the kernel (seen at publishBufs).
func (r *uring) putBuf(bid uint16) {
	slot := r.brTail & (uringBufs - 1)
	r.bufs[slot] = iouBuf{addr: uint64(r.bufBase) + uint64(bid)*uringBufSize, len: uringBufSize, bid: bid}
	if slot == 0 {
		r.bid0 = bid
	}
	r.brTail++
}

// publishBufs stores the buffer ring's tail with release semantics. The tail is a 16-bit field
// and sync/atomic has no 16-bit store: the store writes the aligned 32-bit word that holds it and
// bufs[0].bid, whose value it rewrites unchanged (only this goroutine writes either).
func (r *uring) publishBufs() {
	var w [4]byte
	binary.NativeEndian.PutUint16(w[0:], r.bid0)
	binary.NativeEndian.PutUint16(w[2:], r.brTail)
	atomic.StoreUint32(r.brWord, binary.NativeEndian.Uint32(w[:]))
}

// stop unregisters the buffers: after it, no receive writes to them (the kernel picks and fills a
// buffer under the lock this call takes), so they can be unmapped while requests end.
func (r *uring) stop() {
	reg := iouBufReg{bgid: uringBufGroup}
	_ = iouRegister(r.fd, iouUnregisterPbuf, unsafe.Pointer(&reg), 1)
}

func (r *uring) unmap() {
	if r.unmapped {
		return
	}
	r.unmapped = true
	for _, m := range [][]byte{r.ringMem, r.sqeMem, r.brMem, r.bufMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
}

// ringCQ is a completion the loop took, with the stream it was for.
type ringCQ struct {
	c   iouCQE
	rc  *ringConn
	s   *loopStream
	sid uint64
}

// runRing is the loop's goroutine on the ring, until Close.
func (l *evLoop) runRing() {
	defer close(l.exited)
	_ = l.ring.rc.Read(func(uintptr) bool {
		for l.reap() {
		}
		return false // the queue is empty: park until the ring polls readable again
	})
}

// reap handles the completions queued now; false when there were none.
func (l *evLoop) reap() bool {
	r := l.ring
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	if head == tail {
		if atomic.LoadUint32(r.sqFlags)&iouSQCQOverflow != 0 {
			// completions wait in the kernel's overflow list: this call moves them to the queue
			_ = r.enter(0, 0, iouEnterGetEvents)
			return true
		}
		return false
	}
	l.cqs = l.cqs[:0]
	for ; head != tail; head++ {
		l.cqs = append(l.cqs, ringCQ{c: r.cqes[head&r.cqMask]})
	}
	atomic.StoreUint32(r.cqHead, head) // the entries are copied
	closing := l.closing.Load()

	l.mu.Lock()
	r.mu.Lock()
	for i := range l.cqs {
		q := &l.cqs[i]
		rc := l.rconns[q.c.userData]
		if rc == nil {
			continue // a cancel's completion, or a connection closed since
		}
		q.rc, q.s, q.sid = rc, rc.s, rc.sid
		if q.c.res > 0 && rc.s == nil {
			rc.dead = true // bytes nobody asked for: the connection is not used again
		}
		if q.c.flags&iouCQEFMore != 0 {
			continue
		}
		rc.armed = false
		if (q.c.res > 0 || q.c.res == -int32(unix.ENOBUFS) || q.c.res == -int32(unix.ECANCELED)) && !rc.dead && !closing {
			// the recv stopped with the connection still good (buffers ran out, the arming
			// thread exited): armed again, after this batch gave its buffers back
			rc.armed = true
			r.queueRecv(rc.fd, rc.id)
			continue
		}
		rc.dead = true // the peer closed, or the connection broke: no recv until it is closed
	}
	r.mu.Unlock()
	l.mu.Unlock()

	stray := false
	for i := range l.cqs {
		q := &l.cqs[i]
		n := int(q.c.res)
		var p []byte
		if q.c.flags&iouCQEFBuffer != 0 {
			p = r.buf(uint16(q.c.flags>>iouCQEBufferShift), max(n, 0)) // read in place by the parse
		}
		if q.s != nil && !l.deliver(q.s, q.sid, n, p) && n > 0 {
			stray = true // bytes after the stream's end: the connection is not used again
		} else {
			q.rc = nil
		}
		q.s = nil
	}
	if stray {
		l.mu.Lock()
		for _, q := range l.cqs {
			if q.rc != nil {
				q.rc.dead = true
			}
		}
		l.mu.Unlock()
	}
	for _, q := range l.cqs {
		if q.c.flags&iouCQEFBuffer != 0 {
			r.putBuf(uint16(q.c.flags >> iouCQEBufferShift))
		}
	}
	r.publishBufs()
	_ = r.submit() // the arms queued above, in the one call of this pass
	return true
}

// deliver hands one completion to its stream, as serve does a read's result; false when the
// stream had ended before it.
func (l *evLoop) deliver(s *loopStream, sid uint64, n int, p []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != sid || s.ended {
		return false // a stream that ended since (read to its end, or cancelled)
	}
	if n == -int(unix.ENOBUFS) || n == -int(unix.ECANCELED) {
		return true // the recv is armed again: not the stream's business
	}
	at := time.Now()
	s.last.Store(at.UnixNano())
	switch {
	case n < 0:
		s.broke(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.Errno(-n))})
	case n == 0:
		s.broke(nil)
	default:
		s.at = at
		s.got = true
		s.feed(p)
	}
	if s.ended {
		l.unregister(s)
		select {
		case s.done <- struct{}{}:
		default:
		}
	}
	return true
}
