#include "cache/claim_locks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void jitops__claim_locks_open(jitops__claim_locks *locks, const char *db_path) {
  char path[4200];
  snprintf(path, sizeof path, "%s-claims", db_path);
  locks->fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat st;
  if (locks->fd >= 0 && (fstat(locks->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
                         st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
    close(locks->fd);
    locks->fd = -1;
  }
}

void jitops__claim_locks_close(jitops__claim_locks *locks) {
  if (locks->fd >= 0)
    close(locks->fd);
  locks->fd = -1;
}

static struct flock byte_of(const uint8_t key[16], short type) {
  uint64_t offset = 0;
  memcpy(&offset, key, sizeof offset);
  struct flock lock;
  memset(&lock, 0, sizeof lock);
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = (off_t)(offset & (((uint64_t)1 << 62) - 1));
  lock.l_len = 1;
  return lock;
}

int jitops__claim_lock_take(const jitops__claim_locks *locks, const uint8_t key[16]) {
  if (locks->fd < 0)
    return -1;
  struct flock lock = byte_of(key, F_WRLCK);
  if (fcntl(locks->fd, F_OFD_SETLK, &lock) == 0)
    return 1;
  return errno == EAGAIN || errno == EACCES ? 0 : -1;
}

void jitops__claim_lock_release(const jitops__claim_locks *locks, const uint8_t key[16]) {
  if (locks->fd < 0)
    return;
  struct flock lock = byte_of(key, F_UNLCK);
  fcntl(locks->fd, F_OFD_SETLK, &lock);
}

int jitops__claim_lock_held_elsewhere(const jitops__claim_locks *locks, const uint8_t key[16]) {
  if (locks->fd < 0)
    return -1;
  struct flock lock = byte_of(key, F_WRLCK);
  if (fcntl(locks->fd, F_OFD_GETLK, &lock) != 0)
    return -1;
  return lock.l_type != F_UNLCK;
}
