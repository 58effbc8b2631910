// SPDX-License-Identifier: MIT
// fx-cpp: nearly all CPU in fxwork::Crunch<int>::run(int), a member of a class
// template in a namespace, so its symbol is mangled (_ZN6fxwork6CrunchIiE3runEi).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace fxwork
{

template <typename T> struct Crunch {
	__attribute__((noinline)) static T run(T seed);
};

template <typename T> T Crunch<T>::run(T seed)
{
	uint64_t x = static_cast<uint64_t>(seed);

	for (uint64_t i = 0; i < 5000000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	return static_cast<T>(x & 0x7fffffff);
}

template struct Crunch<int>;

} // namespace fxwork

static double now()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

volatile int sink;

int main(int argc, char **argv)
{
	char *end = nullptr;
	double secs = argc > 1 ? std::strtod(argv[1], &end) : 0;

	if (argc < 2 || end == argv[1] || *end != '\0' || !(secs > 0)) {
		std::fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	double deadline = now() + secs;
	int x = 1;

	while (now() < deadline)
		x = fxwork::Crunch<int>::run(x);
	sink = x;
	return 0;
}
