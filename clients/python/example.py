#!/usr/bin/env python3
"""Leader-only work with the conclave Python client.

Waits until this node's agent leads, then works in rounds for as long as it
still leads *now* (conclave.Status.leads_now: the agent said "leader" and
the lease counted from the question has not run out), passing the epoch to
every side effect as its fencing token. On loss of leadership it goes back
to waiting.

    python3 example.py --socket /run/conclave/agent.sock
    python3 example.py --rounds 3      # stop after three rounds (tests)
"""

import argparse
import sys
import time

import conclave


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default=None, help="agent socket (default: $CONCLAVE_SOCKET, then data/n1/agent.sock)")
    p.add_argument("--rounds", type=int, default=0, help="stop after this many rounds of work (0: never)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between rounds")
    args = p.parse_args(argv)

    c = conclave.Client(args.socket)
    done = 0
    while True:
        # Block until something changes, then look: a watch wakes us the
        # moment this node is elected.
        with c.watch() as w:
            for st in w:
                if st.is_leader:
                    break
                print("follower: leader is %r in epoch %d" % (st.leader, st.epoch), flush=True)
        st = c.status()
        epoch = st.epoch
        print("leading in epoch %d" % epoch, flush=True)
        while st.leads_now() and st.epoch == epoch:
            do_work(epoch, done)
            done += 1
            if args.rounds and done >= args.rounds:
                return 0
            time.sleep(args.interval)
            st = c.status()
        print("lost leadership of epoch %d (now %s)" % (epoch, st), flush=True)


def do_work(epoch, n):
    # A real program passes epoch to what it changes (fence.SQL's pattern:
    # UPDATE ... WHERE epoch = %s), so a replaced leader's writes are refused.
    print("round %d in epoch %d" % (n + 1, epoch), flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except conclave.AgentError as e:
        print("example: %s" % e, file=sys.stderr)
        sys.exit(4)
