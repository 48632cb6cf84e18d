// Command ibvinfo prints RDMA device information exactly as rdma-core's
// ibv_devinfo (rdma-core 44, Debian 12's ibverbs-utils) does, plus JSON
// (-json) and goverbs' extra details (-x). It is a static Go binary: no
// libibverbs, no provider libraries, no libc.
//
// Usage:
//
//	ibvinfo [-d dev] [-i port] [-l] [-v] [-json] [-x]
//
//	-d, --ib-dev=<dev>     use IB device <dev> (default: every device)
//	-i, --ib-port=<port>   use port <port> of IB device (default: all ports)
//	-l, --list             print only the IB device names
//	-v, --verbose          print all the attributes of the IB device(s)
//	-json, --json          print every attribute as JSON (the schema is the
//	                       Report type; -l -json prints a List)
//	-x, --extra            after each device, print what ibv_devinfo does not
//	                       show: driver and driver id, uverbs char device, core
//	                       and driver ABI versions, node type and description,
//	                       netdev per port, every GID with its type and netdev,
//	                       and whether each verb went by ioctl or write
//
// Everything else is ibv_devinfo's, byte for byte, including its quirks:
// the command line is parsed as glibc's getopt_long parses it (option
// abbreviations, grouped short options, operands ignored, its error
// messages naming argv[0]); -i is read with strtol (so "0x1" is port 1)
// and truncated to 8 bits; there is no -h (it is an invalid option: the
// usage is printed and the exit status is 255); stdout is buffered as C's
// stdio buffers it, so that stdout and stderr interleave as ibv_devinfo's do
// when they share a file. Exit status: 0; 255 for a bad option, an unknown
// device or no device; 1 for a bad -i; otherwise the OR of per-device
// codes: 1 open failed, 2 device query failed, 3 close failed, 4 no such
// port, or the errno of a failed port query.
//
// It imports uverbs and the internal helpers getopt and inet.
package main
