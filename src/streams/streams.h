/*
 * streams.h
 *	  Public interface of streams: watermarks.
 *
 * The one header other folders include; the headers it includes are the
 * folder's own.
 */
#ifndef IDEM_STREAMS_H
#define IDEM_STREAMS_H


#endif							/* IDEM_STREAMS_H */
