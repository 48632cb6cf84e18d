// Command ibvinfo prints RDMA device information exactly as rdma-core's
// ibv_devinfo does, plus JSON (-json) and goverbs' extra details (-x).
package main
