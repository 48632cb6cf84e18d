package uverbs

import "github.com/goverbs/goverbs/provider/rxe"

// rxe (soft-RoCE, RDMA_DRIVER_RXE): queues mapped from the command file, a
// write() doorbell per PostSend, receives and polling in shared memory.
func init() { drivers[DriverRXE] = rxe.Driver{} }
