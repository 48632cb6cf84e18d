/* abigen rejects bitfields. */
struct edge_bits {
	unsigned int a : 3;
	unsigned int b : 29;
};
