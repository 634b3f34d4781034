/*
 * init.h
 *	  The module's entry point and its settings: nothing below includes it.
 */
#ifndef IDEM_INIT_H
#define IDEM_INIT_H

extern void IdemDefineGucs(void);

#endif							/* IDEM_INIT_H */
