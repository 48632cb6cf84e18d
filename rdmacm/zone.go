package rdmacm

import (
	"net"
	"strconv"
)

// netInterfaceIndex turns an IPv6 zone (an interface name or number) into
// an interface index.
func netInterfaceIndex(zone string) (int, error) {
	if n, err := strconv.Atoi(zone); err == nil {
		return n, nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}
