/* How fast this machine reads memory: the floor under a one-token step, which reads every weight
 * once. Each thread reads its share of a buffer far larger than the caches as four interleaved
 * runs (one sequential run per thread leaves bandwidth unused: on the 2-core development VM,
 * ~25 GB/s with one run a thread against ~43 with four). Returns bytes per second. */
#include <stdint.h>
#include <omp.h>

double read_bandwidth(const uint64_t *buf, int64_t n_words, int threads) {
    const int RUNS = 4;
    uint64_t sink = 0;
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(^ : sink)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t per = n_words / nt / RUNS, base = t * per * RUNS;
        uint64_t acc[4] = {0, 0, 0, 0};
        for (int64_t i = 0; i < per; i += 8)
            for (int r = 0; r < RUNS; r++)
                for (int j = 0; j < 8; j++) acc[r] ^= buf[base + r * per + i + j];
        sink ^= acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
    }
    double dt = omp_get_wtime() - t0;
    return sink == 0x5eed ? 0.0 : (double)(n_words * 8) / dt;  /* sink keeps the reads */
}
