// bench/peers/tbb_replay.cpp -- the peer of rf-bench engine's "replay" pattern: the
// random DAG of bench/peers/tbb_flowgraph.cpp (node i depends on 1-3 distinct
// nodes among the 64 before it, splitmix64 seed 42; node 0 on a broadcast start
// node), built once as a oneTBB flow graph and then run R times (start.try_put +
// wait_for_all: continue_nodes reset their counts, so the same graph runs again).
// Prints one JSON line: the best run's ops_per_s and ns_per_op (building not counted,
// as ringflow's capture is not).
// Build: g++ -O2 -std=c++17 tbb_replay.cpp -o tbb_replay -ltbb
// Usage: tbb_replay [N] [THREADS] [RUNS]      (default 10000, 2, 20)
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
using namespace tbb::flow;
typedef continue_node<continue_msg> node_t;

static uint64_t sm(uint64_t &s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    long runs = argc > 3 ? atol(argv[3]) : 20;
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
    graph g;
    std::vector<std::unique_ptr<node_t>> nodes;
    nodes.reserve(n);
    broadcast_node<continue_msg> start(g);
    uint64_t seed = 42;
    for (long i = 0; i < n; i++) {
        nodes.emplace_back(new node_t(g, [](const continue_msg &) { return continue_msg(); }));
        if (i == 0) { make_edge(start, *nodes[0]); continue; }
        long lo = i > 64 ? i - 64 : 0, span = i - lo;
        int k = (int)(sm(seed) % 3) + 1; if (k > span) k = (int)span;
        long picked[3]; int m = 0;
        while (m < k) {
            long d = lo + (long)(sm(seed) % (uint64_t)span); bool dup = false;
            for (int q = 0; q < m; q++) dup |= picked[q] == d;
            if (!dup) { picked[m++] = d; make_edge(*nodes[d], *nodes[i]); }
        }
    }
    double best = 1e30;
    for (long r = 0; r < runs; r++) {
        auto t0 = std::chrono::steady_clock::now();
        start.try_put(continue_msg());
        g.wait_for_all();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best) best = s;
    }
    printf("{\"pattern\":\"replay\",\"nodes\":%ld,\"ops_per_s\":%.0f,\"ns_per_op\":%.1f}\n",
           n, n / best, best * 1e9 / n);
    return 0;
}
