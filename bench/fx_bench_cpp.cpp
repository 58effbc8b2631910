// SPDX-License-Identifier: MIT
// fx-bench-cpp SECONDS: a busy C++ program whose own DWARF is large (several
// MiB, in the binary): the standard library's templates (regex, maps,
// strings, streams, sort, function) instantiated for types of its own, as a
// C++ service's are. bench/scale.py's "C++, big debug info" scenario.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fxbench
{

template <int N> struct Order {
	std::string who;
	std::vector<std::pair<int, double>> lines;
	std::map<std::string, std::set<int>> tags;
};

template <typename K, typename V> struct Book {
	std::unordered_map<K, std::vector<V>> by_key;
	std::map<K, std::function<double(const V &)>> rules;

	__attribute__((noinline)) double add(const K &k, const V &v)
	{
		by_key[k].push_back(v);
		auto r = rules.find(k);
		return r == rules.end() ? 0.0 : r->second(v);
	}
};

/* One instantiation per N: each its own set of containers' code and types. */
template <int N> __attribute__((noinline)) double round_of(unsigned seed)
{
	static const std::regex re("([a-z]+)-([0-9]+)\\.(\\w+)");
	Book<std::string, Order<N>> book;
	Book<int, std::string> names;
	std::ostringstream os;
	double sum = 0;

	book.rules["a"] = [](const Order<N> &o) { return static_cast<double>(o.lines.size()); };
	names.rules[1] = [](const std::string &s) { return static_cast<double>(s.size()); };
	for (unsigned i = 0; i < 200; i++) {
		Order<N> o;
		std::smatch m;
		std::string text;

		os.str("");
		os << static_cast<char>('a' + (seed + i) % 26) << "-" << (seed * 31 + i) << ".x" << i;
		text = os.str();
		if (std::regex_match(text, m, re))
			o.who = m[1].str() + m[3].str();
		for (unsigned k = 0; k < 8; k++)
			o.lines.emplace_back(static_cast<int>(k * i), k * 0.5);
		std::sort(o.lines.begin(), o.lines.end(),
			  [](const auto &x, const auto &y) { return x.second > y.second; });
		o.tags[o.who].insert(static_cast<int>(i));
		sum += book.add(o.who.substr(0, 1), o);
		sum += names.add(static_cast<int>(i % 3), o.who);
	}
	return sum;
}

template <int... N> double all_rounds(unsigned seed, std::integer_sequence<int, N...>)
{
	return (round_of<N>(seed + N) + ...);
}

} // namespace fxbench

int main(int argc, char **argv)
{
	double secs = argc > 1 ? std::atof(argv[1]) : 10;
	auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
	unsigned long rounds = 0;
	double sink = 0;

	while (std::chrono::steady_clock::now() < end)
		sink += fxbench::all_rounds(static_cast<unsigned>(rounds++),
					    std::make_integer_sequence<int, 16>{});
	std::printf("ops %lu %g\n", rounds, sink > 0 ? 1.0 : 0.0);
	return 0;
}
