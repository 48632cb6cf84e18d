/* Edge cases for abigen's tests: packed members, unions, anonymous members,
 * flexible arrays, and macros of every kind. */
#ifndef ABIGEN_EDGE_H
#define ABIGEN_EDGE_H

#include <linux/types.h>

#define EDGE_INT 42
#define EDGE_NEG (-5)
#define EDGE_BIG 0xffffffffffffffffULL
#define EDGE_STR "hi \"there\""
#define EDGE_FN(x) ((x) + 1)
#define EDGE_EMPTY
#define EDGE_TYPE struct edge_packed
#define EDGE_SIZE sizeof(struct edge_packed)
#define EDGE_UNDEFINED (EDGE_NOT_DEFINED_ANYWHERE + 1)

enum edge_enum {
	EDGE_A = -1,
	EDGE_B = 0x7fffffff,
};

enum {
	EDGE_C = 1ULL << 40,
	EDGE_D = 0x80000000u,
};

struct edge_packed {
	__u8 a;
	__be32 b;
	__u16 c;
} __attribute__((packed));

struct edge_packed_aligned {
	__be32 x;
	__u8 s;
	__be16 y;
	__u8 z;
	__u64 w;
} __attribute__((packed, aligned(4)));

struct edge_outer {
	__u8 tag;
	struct edge_packed p;
	union {
		__u32 u32v;
		__s16 s16v;
		struct {
			__u8 lo, hi;
		} bytes;
	} un;
	union {
		__u64 anon_a;
		__s64 anon_b;
	};
	struct {
		__u32 in1;
		__u32 in2;
	};
	__u32 tail[];
};

struct edge_misaligned {
	__u32 head;
	struct edge_packed_aligned pa;
	__u32 after;
} __attribute__((packed));

struct edge_nested_tail {
	__u64 a;
	struct edge_outer o;
};

#endif
