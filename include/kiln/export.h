/* What libkiln.so exports: every kiln library is compiled with hidden visibility, and the public
 * API (the C++ API of kiln/kiln.h, the C API of kiln/kiln_c.h and the vocabulary they use) is
 * marked KILN_EXPORT. C and C++. */
#ifndef KILN_EXPORT_H
#define KILN_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define KILN_EXPORT __attribute__((visibility("default")))
#else
#define KILN_EXPORT
#endif

#endif /* KILN_EXPORT_H */
